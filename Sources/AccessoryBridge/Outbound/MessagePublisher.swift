import MQTTClient

/// Where the bridge's messages go: the MQTT client in production, a recorder in tests.
public protocol MessagePublisher: Sendable {
    /// Queues `message` for sending.
    func send(_ message: MQTTMessage) throws(MQTTError)

    /// How many messages wait to be sent (for the outbound queue gauge).
    var pendingMessages: Int { get }
}

extension MessagePublisher {
    public var pendingMessages: Int { 0 }
}

extension MQTTClient: MessagePublisher {
    public func send(_ message: MQTTMessage) throws(MQTTError) {
        try publish(message)
    }
}
