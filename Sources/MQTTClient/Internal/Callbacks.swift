import CMosquitto
import Logging

/// libmosquitto's callbacks, on the network thread (libmosquitto calls back only from its loop functions, which that
/// thread alone runs). Each copies what it needs out of libmosquitto's memory before it returns.
extension ClientCore {
    static func from(_ userdata: UnsafeMutableRawPointer?) -> ClientCore {
        Unmanaged<ClientCore>.fromOpaque(userdata!).takeUnretainedValue()
    }

    /// ``from(_:)`` in a callback for a packet libmosquitto read, counted in ``LoopContext/packetsHandled``.
    static func forPacket(_ userdata: UnsafeMutableRawPointer?) -> ClientCore {
        let core = from(userdata)
        core.loop.packetsHandled &+= 1
        return core
    }

    func installCallbacks() {
        let pointer = handle.pointer
        mosquitto_connect_v5_callback_set(pointer) { _, userdata, reason, flags, _ in
            let core = ClientCore.forPacket(userdata)
            if reason == 0 { core.loop.connack = flags }
            core.perform(core.loop.machine.connackReceived(reason: reason, sessionPresent: flags & 1 != 0))
        }
        mosquitto_disconnect_v5_callback_set(pointer) { _, userdata, code, _ in
            let core = ClientCore.from(userdata)
            core.loop.connack = nil
            // After a stop the machine reports no error: the DISCONNECT was this client's own.
            core.perform(core.loop.machine.connectionEnded(MQTTError.disconnected(code: code), at: .now))
        }
        mosquitto_message_v5_callback_set(pointer) { _, userdata, message, properties in
            guard let message else { return }
            let core = ClientCore.forPacket(userdata)
            if message.pointee.qos > 0 { core.loop.acknowledgementsOwed &+= 1 }
            core.finishConnecting()
            core.received(message.pointee, properties)
        }
        mosquitto_subscribe_v5_callback_set(pointer) { _, userdata, mid, count, codes, _ in
            let copied = codes.map { Array(UnsafeBufferPointer(start: $0, count: Int(max(count, 0)))) } ?? []
            let core = ClientCore.forPacket(userdata)
            core.finishConnecting()
            core.subscribeAcknowledged(mid: mid, codes: copied)
        }
        mosquitto_publish_v5_callback_set(pointer) { _, userdata, mid, reason, _ in
            let core = ClientCore.forPacket(userdata)
            core.finishConnecting()
            core.published(mid: mid, reason: reason)
        }
        // libmosquitto formats a log line for every packet when a log callback is set, whatever its level: only when
        // those lines would be logged (measured: 2% of the bridge's time under load).
        if logger.logLevel <= .debug {
            mosquitto_log_callback_set(pointer) { _, userdata, level, line in
                guard let line else { return }
                ClientCore.from(userdata).libraryLogged(level: level, line)
            }
        }
    }

    /// Opens the connection to everything else once libmosquitto's handling of a CONNACK is over — it then queued
    /// again the messages that were in flight — at the first callback or turn of the loop after it. MQTT keeps a
    /// client's messages in order only if what waited comes after those: a hub's message sent while the broker was
    /// away would otherwise reach it behind the next one, and be refused as out of order.
    func finishConnecting() {
        guard loop.connack != nil else { return }
        loop.connack = nil
        perform(loop.machine.connackHandled(at: .now))
    }

    private func received(_ message: mosquitto_message, _ properties: OpaquePointer?) {
        let payload: [UInt8] =
            if message.payloadlen > 0, let bytes = message.payload {
                [UInt8](UnsafeRawBufferPointer(start: bytes, count: Int(message.payloadlen)))
            } else {
                []
            }
        loop.handler?.received(
            MQTTMessage(
                topic: String(cString: message.topic),
                payload: payload,
                qos: QoS(rawValue: message.qos) ?? .atMostOnce,
                retain: message.retain,
                properties: properties.map { MQTTProperties(copying: $0) } ?? .none
            )
        )
    }

    private func published(mid: Int32, reason: Int32) {
        let drained = state.withLock { state in
            state.unacknowledged.remove(mid) != nil && state.unacknowledged.isEmpty ? state.drainWaiters.removeAll() : []
        }
        for waiter in drained { waiter.resume() }
        sendPending()
        guard reason >= 0x80 else { return }
        logger.warning(
            "MQTT publish refused by the broker",
            metadata: [
                "mqtt.mid": "\(mid)", "mqtt.reason_code": "\(reason)",
                "mqtt.error": "\(MosquittoLibrary.reasonText(reason))",
            ]
        )
    }

    private func libraryLogged(level: Int32, _ line: UnsafePointer<CChar>) {
        let logLevel: Logger.Level =
            switch level {
            case MOSQ_LOG_ERR: .error
            case MOSQ_LOG_WARNING: .warning
            case MOSQ_LOG_NOTICE: .notice
            case MOSQ_LOG_INFO: .info
            case MOSQ_LOG_DEBUG: .debug
            default: .trace
            }
        guard logger.logLevel <= logLevel else { return }
        logger.log(level: logLevel, "libmosquitto", metadata: ["mqtt.library_log": "\(String(cString: line))"])
    }
}
