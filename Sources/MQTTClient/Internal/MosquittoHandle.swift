import CMosquitto
import CMosquittoInterpose

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The `struct mosquitto *` of one client.
// @unchecked Sendable: the pointer is used from several threads only the way libmosquitto allows in threaded mode
// (`mosquitto_threaded_set`): the network thread alone connects and runs the loop; other threads only publish,
// subscribe and disconnect, and only under `ClientCore.library`, whose flag turns false before
// `mosquitto_destroy`, which runs after the network loop let go of the session (or on its thread, as it does).
struct MosquittoHandle: @unchecked Sendable {
    let pointer: OpaquePointer
}

extension MosquittoHandle {
    /// `mosquitto_new` and every option of `configuration`, MQTT 5, threaded mode; without libmosquitto's wake-up
    /// socket pair (`cmosquitto_new`: the session's network loop wakes itself, and never reads the pair).
    static func make(_ configuration: MQTTConfiguration) throws(MQTTError) -> MosquittoHandle {
        MosquittoLibrary.initialized
        guard !configuration.clientID.isEmpty else { throw MQTTError.invalidArgument("empty client identifier") }
        guard !configuration.host.isEmpty else { throw MQTTError.invalidArgument("empty broker host") }
        guard (1...65535).contains(configuration.port) else {
            throw MQTTError.invalidArgument("broker port \(configuration.port) out of range")
        }
        guard configuration.keepAlive >= .seconds(5), configuration.keepAlive <= .seconds(65535) else {
            throw MQTTError.invalidArgument("keep-alive must be between 5 and 65535 seconds")
        }
        guard configuration.reconnectDelay > .zero else {
            throw MQTTError.invalidArgument("the reconnect delay must be positive")
        }
        guard (1...65535).contains(configuration.maximumInflightMessages) else {
            throw MQTTError.invalidArgument("maximum inflight messages must be between 1 and 65535")
        }
        guard (1...65535).contains(configuration.maximumIncomingInflightMessages) else {
            throw MQTTError.invalidArgument("maximum incoming inflight messages must be between 1 and 65535")
        }
        // MQTT 5: clean_session is the CONNECT "clean start" flag.
        guard let pointer = cmosquitto_new(configuration.clientID, configuration.cleanStart, nil) else {
            throw MQTTError.library(MosquittoLibrary.errno)
        }
        do throws(MQTTError) {
            try MosquittoLibrary.check(mosquitto_int_option(pointer, MOSQ_OPT_PROTOCOL_VERSION, MQTT_PROTOCOL_V5))
            // Our own thread runs the loop: packets from other threads are queued, and the loop woken.
            try MosquittoLibrary.check(mosquitto_threaded_set(pointer, true))
            try MosquittoLibrary.check(mosquitto_int_option(pointer, MOSQ_OPT_TCP_NODELAY, configuration.tcpNoDelay ? 1 : 0))
            // The client keeps the window itself (see ClientCore.submit); libmosquitto's is the same.
            try MosquittoLibrary.check(
                mosquitto_int_option(pointer, MOSQ_OPT_SEND_MAXIMUM, Int32(configuration.maximumInflightMessages))
            )
            try MosquittoLibrary.check(
                mosquitto_int_option(
                    pointer, MOSQ_OPT_RECEIVE_MAXIMUM, Int32(configuration.maximumIncomingInflightMessages)
                )
            )
            if configuration.username != nil || configuration.password != nil {
                try MosquittoLibrary.check(mosquitto_username_pw_set(pointer, configuration.username, configuration.password))
            }
            if let tls = configuration.tls {
                // libmosquitto says only "invalid arguments" for a file it cannot read: name the file and why.
                for (what, path) in [("CA file", tls.caFile), ("certificate file", tls.certificateFile),
                                     ("key file", tls.keyFile)] {
                    guard let path, access(path, R_OK) != 0 else { continue }
                    throw MQTTError.invalidArgument(
                        "the \(what) \(path) cannot be read: \(MosquittoLibrary.systemErrorText(cmosquitto_errno()))")
                }
                try MosquittoLibrary.check(mosquitto_tls_set(pointer, tls.caFile, nil, tls.certificateFile, tls.keyFile, nil))
            }
            if let will = configuration.will {
                try setWill(will, on: pointer)
            }
        } catch {
            mosquitto_destroy(pointer)
            throw error
        }
        return MosquittoHandle(pointer: pointer)
    }

    private static func setWill(_ will: MQTTMessage, on pointer: OpaquePointer) throws(MQTTError) {
        try validatePublishTopic(will.topic)
        guard will.payload.count <= maximumPayloadSize else { throw MQTTError.invalidArgument("will payload too large") }
        let properties = try OutgoingProperties(will.properties)
        let list = properties.list
        let rc = will.payload.withUnsafeBytes { bytes in
            mosquitto_will_set_v5(
                pointer, will.topic, Int32(bytes.count), bytes.baseAddress, will.qos.rawValue, will.retain, list
            )
        }
        guard rc == MosquittoLibrary.success else { throw MQTTError.library(rc) }
        // On success libmosquitto owns (and frees) the list.
        _ = properties.handOver()
    }
}

/// MQTT's largest payload.
let maximumPayloadSize = 268_435_455

/// `mosquitto_pub_topic_check2`: a topic to publish to has no wildcards.
func validatePublishTopic(_ topic: String) throws(MQTTError) {
    let length = topic.utf8.count
    guard length > 0, mosquitto_pub_topic_check2(topic, length) == MosquittoLibrary.success else {
        throw MQTTError.invalidArgument("invalid topic to publish to: \"\(topic)\"")
    }
}

/// `mosquitto_sub_topic_check2`: wildcards only as whole levels, `#` last.
func validateSubscriptionFilter(_ filter: String) throws(MQTTError) {
    let length = filter.utf8.count
    guard length > 0, mosquitto_sub_topic_check2(filter, length) == MosquittoLibrary.success else {
        throw MQTTError.invalidArgument("invalid subscription filter: \"\(filter)\"")
    }
}

/// MQTT keep-alive in whole seconds; libmosquitto requires at least 5.
func keepAliveSeconds(_ keepAlive: Duration) -> Int32 {
    Int32(clamping: max(5, min(Int64(UInt16.max), keepAlive.components.seconds)))
}

