import CMosquitto

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A libmosquitto property list built from ``MQTTProperties`` for one PUBLISH or will; freed when it goes away
/// unless ownership was handed to libmosquitto with ``handOver()``.
struct OutgoingProperties: ~Copyable {
    /// `mosquitto_property *`; `nil` for an empty list.
    private(set) var list: OpaquePointer?

    init(_ properties: MQTTProperties) throws(MQTTError) {
        list = nil
        if properties == .none { return }
        do throws(MQTTError) {
            if let contentType = properties.contentType {
                try MosquittoLibrary.check(mosquitto_property_add_string(&list, Int32(MQTT_PROP_CONTENT_TYPE.rawValue), contentType))
            }
            if let responseTopic = properties.responseTopic {
                try MosquittoLibrary.check(mosquitto_property_add_string(&list, Int32(MQTT_PROP_RESPONSE_TOPIC.rawValue), responseTopic))
            }
            if let correlationData = properties.correlationData {
                guard correlationData.count <= Int(UInt16.max) else {
                    throw MQTTError.invalidArgument("correlation data longer than 65535 bytes")
                }
                let rc = correlationData.withUnsafeBytes { bytes in
                    mosquitto_property_add_binary(
                        &list, Int32(MQTT_PROP_CORRELATION_DATA.rawValue), bytes.baseAddress, UInt16(bytes.count)
                    )
                }
                try MosquittoLibrary.check(rc)
            }
            if let messageExpiry = properties.messageExpiry {
                try MosquittoLibrary.check(
                    mosquitto_property_add_int32(
                        &list, Int32(MQTT_PROP_MESSAGE_EXPIRY_INTERVAL.rawValue), wholeSeconds(messageExpiry)
                    )
                )
            }
            for property in properties.userProperties {
                try MosquittoLibrary.check(
                    mosquitto_property_add_string_pair(
                        &list, Int32(MQTT_PROP_USER_PROPERTY.rawValue), property.name, property.value
                    )
                )
            }
        } catch {
            mosquitto_property_free_all(&list)
            throw error
        }
    }

    /// Gives the list to libmosquitto (`mosquitto_will_set_v5` takes ownership on success).
    consuming func handOver() -> OpaquePointer? {
        let list = self.list
        discard self
        return list
    }

    deinit {
        var list = self.list
        mosquitto_property_free_all(&list)
    }
}

/// A duration as MQTT's 32-bit whole seconds (fractions dropped, clamped to the range).
func wholeSeconds(_ duration: Duration) -> UInt32 {
    let seconds = duration.components.seconds
    if seconds <= 0 { return 0 }
    return UInt32(clamping: seconds)
}

extension MQTTProperties {
    /// Copies the properties of a received PUBLISH; libmosquitto frees the list when the callback returns.
    init(copying list: OpaquePointer) {
        self.init()
        var current: OpaquePointer? = list
        while let property = current {
            let identifier = mosquitto_property_identifier(property)
            switch identifier {
            case Int32(MQTT_PROP_CONTENT_TYPE.rawValue):
                contentType = readString(property, identifier)
            case Int32(MQTT_PROP_RESPONSE_TOPIC.rawValue):
                responseTopic = readString(property, identifier)
            case Int32(MQTT_PROP_CORRELATION_DATA.rawValue):
                var value: UnsafeMutableRawPointer?
                var length: UInt16 = 0
                if mosquitto_property_read_binary(property, identifier, &value, &length, false) != nil {
                    if let value {
                        correlationData = [UInt8](UnsafeRawBufferPointer(start: value, count: Int(length)))
                        free(value)
                    } else {
                        correlationData = []
                    }
                }
            case Int32(MQTT_PROP_MESSAGE_EXPIRY_INTERVAL.rawValue):
                var value: UInt32 = 0
                if mosquitto_property_read_int32(property, identifier, &value, false) != nil {
                    messageExpiry = .seconds(Int64(value))
                }
            case Int32(MQTT_PROP_USER_PROPERTY.rawValue):
                var name: UnsafeMutablePointer<CChar>?
                var value: UnsafeMutablePointer<CChar>?
                if mosquitto_property_read_string_pair(property, identifier, &name, &value, false) != nil {
                    userProperties.append(
                        UserProperty(name.map { String(cString: $0) } ?? "", value.map { String(cString: $0) } ?? "")
                    )
                    free(name)
                    free(value)
                }
            default:
                break
            }
            current = mosquitto_property_next(property)
        }
    }
}

/// Reads the string property at the head of `property` (whose identifier is `identifier`).
private func readString(_ property: OpaquePointer, _ identifier: Int32) -> String? {
    var value: UnsafeMutablePointer<CChar>?
    guard mosquitto_property_read_string(property, identifier, &value, false) != nil else { return nil }
    guard let value else { return "" }
    defer { free(value) }
    return String(cString: value)
}
