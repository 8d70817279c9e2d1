import CMosquitto
import Logging

/// Subscriptions: remembered in ``ClientState/subscriptions``, sent at once when connected and again after every
/// (re)connect, and each SUBACK matched with the filter it answers.
extension ClientCore {
    /// Sends SUBSCRIBE for `subscription`; on the network thread (connect callback) or under `library`.
    /// Returns the message id, or `nil` when not connected (the next connect sends it).
    func sendSubscribe(_ subscription: Subscription, on pointer: OpaquePointer) throws(MQTTError) -> Int32? {
        var mid: Int32 = 0
        let options = subscription.noLocal ? Int32(MQTT_SUB_OPT_NO_LOCAL.rawValue) : 0
        let rc = mosquitto_subscribe_v5(pointer, &mid, subscription.filter, subscription.qos.rawValue, options, nil)
        if rc == MosquittoLibrary.noConnection { return nil }
        guard rc == MosquittoLibrary.success else { throw MQTTError.library(rc) }
        return mid
    }

    /// Remembers which filter a SUBSCRIBE carried, or reports its SUBACK if that came first.
    func recordSubscribe(mid: Int32, filter: String) {
        let early: [Int32]? = state.withLock { state in
            if let codes = state.earlySubacks.removeValue(forKey: mid) { return codes }
            state.pendingSubscribes[mid] = [filter]
            return nil
        }
        if let early { reportSubscribeResult(filters: [filter], codes: early) }
    }

    /// Sends every remembered subscription again: on the network thread, from the CONNACK's callback (calling
    /// libmosquitto from its own callback only queues the packets: no deadlock).
    func resubscribe() {
        let subscriptions = state.withLock { state in
            state.pendingSubscribes.removeAll()
            state.earlySubacks.removeAll()
            return state.subscriptions.values
        }
        for subscription in subscriptions {
            do {
                if let mid = try sendSubscribe(subscription, on: handle.pointer) {
                    recordSubscribe(mid: mid, filter: subscription.filter)
                }
            } catch {
                logger.error(
                    "MQTT resubscribe failed", metadata: ["mqtt.filter": "\(subscription.filter)", "mqtt.error": "\(error)"]
                )
            }
        }
    }

    func subscribeAcknowledged(mid: Int32, codes: [Int32]) {
        let filters: [String]? = state.withLock { state in
            if let filters = state.pendingSubscribes.removeValue(forKey: mid) { return filters }
            state.earlySubacks[mid] = codes
            return nil
        }
        if let filters { reportSubscribeResult(filters: filters, codes: codes) }
    }

    private func reportSubscribeResult(filters: [String], codes: [Int32]) {
        for (filter, code) in zip(filters, codes) where code >= 0x80 {
            let error = MQTTError(kind: .subscriptionRefused, code: code, message: MosquittoLibrary.reasonText(code))
            logger.warning(
                "MQTT subscription refused",
                metadata: ["mqtt.filter": "\(filter)", "mqtt.reason_code": "\(code)", "mqtt.error": "\(error.message)"]
            )
            onEvent(.subscriptionRefused(filter: filter, error))
        }
    }
}
