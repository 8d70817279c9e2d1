import CMosquitto
import Logging

/// Runs what a session's ``ConnectionStateMachine`` decides, on its network thread: the same for a receiving session,
/// which runs its loop, and a publishing one, which its receiving session's loop runs beside it.
extension ClientCore {
    func perform(_ actions: [ConnectionStateMachine.Action]) {
        for action in actions {
            switch action {
            case .connect(let first):
                if let gate = configuration.connectionGate, let reason = gate() {
                    let error = MQTTError(kind: .notPermitted, code: MosquittoLibrary.noConnection, message: reason)
                    perform(loop.machine.attemptFailed(error, at: .now))
                    continue
                }
                // The gate may have refused the first attempt: libmosquitto learns the broker's address (and the
                // CONNECT properties) from the first call that reaches it, and `mosquitto_reconnect` before it fails.
                loop.connections += 1
                reader?.drop()
                writer?.drop()
                // What the last connection owed or let wait went with it.
                loop.acknowledgementsOwed = 0
                loop.writesWaitSince = nil
                let rc = first || !loop.addressGiven ? connectFirst() : mosquitto_reconnect(handle.pointer)
                if rc != MosquittoLibrary.success {
                    perform(loop.machine.attemptFailed(MQTTError.library(rc), at: .now))
                }
            case .resubscribe:
                resubscribe()
            case .open(let sessionPresent):
                open(sessionPresent: sessionPresent)
            case .refused(let error):
                var metadata: Logger.Metadata = ["mqtt.reason_code": "\(error.code)", "mqtt.error": "\(error.message)"]
                if let hint = error.hint { metadata["mqtt.hint"] = "\(hint)" }
                logger.warning("MQTT connection refused", metadata: metadata)
                attemptFailed(error)
                onEvent(.connectionRefused(error))
            case .attemptFailed(let error, let retryAt):
                var metadata: Logger.Metadata = [
                    "mqtt.host": "\(configuration.host)", "mqtt.port": "\(configuration.port)", "mqtt.error": "\(error)",
                    "mqtt.retry_in": "\(retryAt - .now)",
                ]
                if let hint = error.hint { metadata["mqtt.hint"] = "\(hint)" }
                logger.warning("MQTT connect failed; retrying", metadata: metadata)
                attemptFailed(error)
            case .closedConnection(let error):
                closed(error)
            case .retry(let at):
                logger.debug("MQTT reconnecting after a delay", metadata: ["mqtt.delay": "\(at - .now)"])
            case .sendDisconnect:
                logger.debug("MQTT disconnecting")
                _ = mosquitto_disconnect_v5(handle.pointer, Int32(MQTT_RC_NORMAL_DISCONNECTION.rawValue), nil)
            case .dropConnection:
                logger.warning("MQTT DISCONNECT not sent in time")
            case .finish:
                loop.finished = true
            }
        }
    }

    /// The first attempt, the one that passes the CONNECT properties (session expiry interval); libmosquitto keeps
    /// them for `mosquitto_reconnect`, also after a failed first attempt.
    private func connectFirst() -> Int32 {
        loop.addressGiven = true
        var properties: OpaquePointer?
        defer { mosquitto_property_free_all(&properties) }
        if let sessionExpiry = configuration.sessionExpiry {
            let rc = mosquitto_property_add_int32(
                &properties, Int32(MQTT_PROP_SESSION_EXPIRY_INTERVAL.rawValue), wholeSeconds(sessionExpiry)
            )
            if rc != MosquittoLibrary.success { return rc }
        }
        return mosquitto_connect_bind_v5(
            handle.pointer, configuration.host, Int32(configuration.port), keepAliveSeconds(configuration.keepAlive), nil,
            properties
        )
    }

    /// Remembers why an attempt to connect failed. Before the first connection, a failure that trying again cannot
    /// mend (``MQTTError/isPermanent``: credentials, authorization, TLS) ends the wait of whoever waits for it; the
    /// client still retries.
    private func attemptFailed(_ error: MQTTError) {
        let waiters = state.withLock { state in
            state.lastFailure = error
            return !state.hasConnected && error.isPermanent ? state.connectionWaiters.removeAll() : []
        }
        for waiter in waiters { waiter.resume(returning: .failure(error)) }
    }

    /// The connection is open to everything else: it counts as connected, waiters are released, the handler hears of
    /// it, and what waited leaves.
    private func open(sessionPresent: Bool) {
        // Waiters are released after the SUBSCRIBEs of the CONNACK's callback: what they publish next goes out behind
        // them, so a message published to a filter subscribed before `start()` comes back (the bridge's rebuild
        // marker relies on it).
        let (subscriptions, waiters) = state.withLock { state in
            state.isConnected = true
            state.hasConnected = true
            state.lastFailure = nil
            return (state.subscriptions.count, state.connectionWaiters.removeAll())
        }
        logger.info(
            "MQTT connected",
            metadata: ["mqtt.session_present": "\(sessionPresent)", "mqtt.subscriptions": "\(subscriptions)"]
        )
        onEvent(.connected(sessionPresent: sessionPresent))
        for waiter in waiters { waiter.resume(returning: .success(())) }
        // What waited for the connection leaves now, behind the SUBSCRIBEs and what the handler just published.
        sendPending()
    }

    /// An open connection ended: `nil` when this client asked (a stop), else why.
    private func closed(_ error: MQTTError?) {
        let drained = state.withLock { state in
            state.isConnected = false
            // Nothing is acknowledged without a connection: whoever waits for that stops waiting.
            return state.drainWaiters.removeAll()
        }
        for waiter in drained { waiter.resume() }
        if let error {
            logger.warning("MQTT connection lost", metadata: ["mqtt.code": "\(error.code)", "mqtt.error": "\(error.message)"])
        } else {
            logger.info("MQTT disconnected")
        }
        onEvent(.disconnected(error))
    }
}
