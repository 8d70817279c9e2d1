import CMosquitto

extension ClientCore {
    /// Sends `message` now if the window has room and nothing waits before it, else makes it wait in order (QoS 0
    /// cannot wait: it is sent or refused at once).
    ///
    /// Deciding and handing the message to libmosquitto happen under one lock, as in ``sendPending()``: a message
    /// published by any caller (an API user's thread, or the handler on the network thread that also runs this
    /// publishing session) can never overtake one that ``sendPending()`` took from the queue and has not handed on
    /// yet.
    func submit(_ message: MQTTMessage) throws(MQTTError) {
        let window = configuration.maximumInflightMessages
        let limit = configuration.maximumPendingMessages
        let sent = try withHandle { pointer throws(MQTTError) -> Bool in
            try state.withLock { (state: inout ClientState) throws(MQTTError) -> Bool in
                guard state.lifecycle != .closed else { throw MQTTError.closed }
                if message.qos == .atMostOnce
                    || (state.isConnected && state.pending.isEmpty && state.unacknowledged.count < window)
                {
                    try publish(message, on: pointer, recordingIn: &state)
                    return true
                }
                guard state.pending.count < limit else {
                    state.refusedSinceDrained = true
                    throw MQTTError(
                        kind: .queueFull, code: MosquittoLibrary.noConnection,
                        message: "\(limit) messages already wait for \(state.isConnected ? "room to be sent" : "the next connection")")
                }
                state.pending.append(message)
                state.pendingPeak = max(state.pendingPeak, state.pending.count)
                waiting.store(state.pending.count, ordering: .relaxed)
                return false
            }
        }
        // A session in its turn writes what it queued itself before the turn ends; any other packet needs a turn.
        if sent { wake() }
    }

    /// Hands waiting messages to libmosquitto while the window has room. On the network thread: after an
    /// acknowledgement, and after (re)connecting.
    func sendPending() {
        enum Step {
            case sent
            case failed(MQTTMessage, MQTTError)
            case stop(drained: Bool)
        }
        let window = configuration.maximumInflightMessages
        while true {
            let step = (try? withHandle { pointer in
                state.withLock { state -> Step in
                    defer { waiting.store(state.pending.count, ordering: .relaxed) }
                    guard state.isConnected, state.unacknowledged.count < window else { return .stop(drained: false) }
                    if let next = state.pending.popFirst() {
                        do throws(MQTTError) {
                            try publish(next, on: pointer, recordingIn: &state)
                            return .sent
                        } catch {
                            return .failed(next, error)
                        }
                    }
                    if state.pendingPeak > 1024 { state.pending = [] }
                    state.pendingPeak = 0
                    defer { state.refusedSinceDrained = false }
                    return .stop(drained: state.refusedSinceDrained)
                }
            }) ?? .stop(drained: false)
            switch step {
            case .sent:
                continue
            case .failed(let message, let error):
                logger.error(
                    "MQTT publish of a waiting message failed",
                    metadata: ["mqtt.topic": "\(message.topic)", "mqtt.error": "\(error)"])
            case .stop(let drained):
                if drained { onEvent(.queueDrained) }
                return
            }
        }
    }

    /// `mosquitto_publish_v5`, recording the message id of a QoS > 0 message until its acknowledgement; under the
    /// library and state locks, so that the acknowledgement (on the network thread) cannot come before the id is
    /// recorded. libmosquitto only queues here: it never waits for the network thread.
    private func publish(
        _ message: MQTTMessage, on pointer: OpaquePointer, recordingIn state: inout ClientState
    ) throws(MQTTError) {
        let properties = try OutgoingProperties(message.properties)
        var mid: Int32 = 0
        let rc = message.payload.withUnsafeBytes { bytes in
            mosquitto_publish_v5(
                pointer, &mid, message.topic, Int32(bytes.count), bytes.baseAddress, message.qos.rawValue,
                message.retain, properties.list)
        }
        // libmosquitto keeps a QoS > 0 message for the next connection, but still says MOSQ_ERR_NO_CONN.
        guard rc == MosquittoLibrary.success || (rc == MosquittoLibrary.noConnection && message.qos != .atMostOnce)
        else { throw MQTTError.library(rc) }
        if message.qos != .atMostOnce { state.unacknowledged.insert(mid) }
        publishedSinceWrite.add(1, ordering: .relaxed)
    }
}
