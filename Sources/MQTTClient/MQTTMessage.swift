/// MQTT's quality of service levels.
public enum QoS: Int32, Hashable, Sendable, CaseIterable {
    case atMostOnce = 0
    case atLeastOnce = 1
    case exactlyOnce = 2
}

/// A name-value pair of MQTT 5 user properties.
public struct UserProperty: Hashable, Sendable {
    public var name: String
    public var value: String

    public init(_ name: String, _ value: String) {
        self.name = name
        self.value = value
    }
}

/// The MQTT 5 PUBLISH properties the bridge sends and reads.
public struct MQTTProperties: Hashable, Sendable {
    /// MQTT 5 content type, such as `application/json`.
    public var contentType: String?
    /// Where the receiver should send its response (request/response).
    public var responseTopic: String?
    /// Opaque bytes the responder copies into its response.
    public var correlationData: [UInt8]?
    /// How long the broker keeps the message for subscribers that have not received it (whole seconds).
    public var messageExpiry: Duration?
    public var userProperties: [UserProperty]

    public init(
        contentType: String? = nil, responseTopic: String? = nil, correlationData: [UInt8]? = nil,
        messageExpiry: Duration? = nil, userProperties: [UserProperty] = []
    ) {
        self.contentType = contentType
        self.responseTopic = responseTopic
        self.correlationData = correlationData
        self.messageExpiry = messageExpiry
        self.userProperties = userProperties
    }

    /// No properties.
    public static let none = MQTTProperties()
}

/// A message received or to publish: copied out of libmosquitto, owned by Swift.
public struct MQTTMessage: Hashable, Sendable {
    public var topic: String
    public var payload: [UInt8]
    public var qos: QoS
    public var retain: Bool
    public var properties: MQTTProperties

    public init(
        topic: String, payload: [UInt8], qos: QoS = .atLeastOnce, retain: Bool = false,
        properties: MQTTProperties = .none
    ) {
        self.topic = topic
        self.payload = payload
        self.qos = qos
        self.retain = retain
        self.properties = properties
    }
}
