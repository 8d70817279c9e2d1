import CMosquitto

extension ClientCore {
    /// Sends `message` now if the window has room and nothing waits before it, else makes it wait in order (QoS 0
    /// cannot wait: it is sent or refused at once).
    func submit(_ message: MQTTMessage) throws(MQTTError) {
        guard message.qos != .atMostOnce else {
            try send(message)
            return
        }
        let window = configuration.maximumInflightMessages
        let limit = configuration.maximumPendingMessages
        let now = try state.withLock { (state: inout ClientState) throws(MQTTError) -> Bool in
            guard state.lifecycle != .closed else { throw MQTTError.closed }
            if state.isConnected, state.pending.isEmpty, state.unacknowledged.count < window { return true }
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
        if now { try send(message) }
    }

    /// Hands waiting messages to libmosquitto while the window has room. On the network thread: after an
    /// acknowledgement, and after (re)connecting.
    func sendPending() {
        let window = configuration.maximumInflightMessages
        while true {
            let (next, drained): (MQTTMessage?, Bool) = state.withLock { state in
                defer { waiting.store(state.pending.count, ordering: .relaxed) }
                guard state.isConnected, state.unacknowledged.count < window else { return (nil, false) }
                if let next = state.pending.popFirst() { return (next, false) }
                if state.pendingPeak > 1024 { state.pending = [] }
                state.pendingPeak = 0
                defer { state.refusedSinceDrained = false }
                return (nil, state.refusedSinceDrained)
            }
            if drained { onEvent(.queueDrained) }
            guard let next else {
                loop.receiving?.publishingQueueShrank(to: waiting.load(ordering: .relaxed))
                return
            }
            do {
                try send(next)
            } catch {
                logger.error("MQTT publish of a waiting message failed", metadata: ["mqtt.topic": "\(next.topic)", "mqtt.error": "\(error)"])
            }
        }
    }

    /// `mosquitto_publish_v5`, recording the message id of a QoS > 0 message until its acknowledgement.
    private func send(_ message: MQTTMessage) throws(MQTTError) {
        let properties = try OutgoingProperties(message.properties)
        let list = properties.list
        try withHandle { pointer throws(MQTTError) in
            // Under the state lock, so that the acknowledgement (on the network thread) cannot come before the id
            // is recorded. libmosquitto only queues here: it never waits for the network thread.
            try state.withLock { (state: inout ClientState) throws(MQTTError) in
                var mid: Int32 = 0
                let rc = message.payload.withUnsafeBytes { bytes in
                    mosquitto_publish_v5(
                        pointer, &mid, message.topic, Int32(bytes.count), bytes.baseAddress, message.qos.rawValue,
                        message.retain, list)
                }
                // libmosquitto keeps a QoS > 0 message for the next connection, but still says MOSQ_ERR_NO_CONN.
                guard
                    rc == MosquittoLibrary.success || (rc == MosquittoLibrary.noConnection && message.qos != .atMostOnce)
                else { throw MQTTError.library(rc) }
                if message.qos != .atMostOnce { state.unacknowledged.insert(mid) }
            }
        }
        // The network thread writes what it queued itself on its next turn; any other thread's packet must wake it.
        if !loop.isCurrent { wakePipe.signal() }
    }
}
