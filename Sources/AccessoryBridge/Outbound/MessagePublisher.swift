import MQTTClient

/// Where the bridge's messages go, and what it reads: the MQTT client in production, a recorder in tests.
public protocol MessagePublisher: Sendable {
    /// Queues `message` for sending.
    func send(_ message: MQTTMessage) throws(MQTTError)

    /// Starts reading `filter` (in a cluster, a playing device's state that a slot's accessory lists now).
    func subscribe(_ filter: String) throws(MQTTError)

    /// Stops reading `filter`.
    func unsubscribe(_ filter: String) throws(MQTTError)

    /// How many messages wait to be sent: for the outbound queue gauge, and so that announcing to home automation
    /// goes on only while little waits.
    var pendingMessages: Int { get }
}

extension MessagePublisher {
    public var pendingMessages: Int { 0 }
}

extension MQTTClient: MessagePublisher {
    public func send(_ message: MQTTMessage) throws(MQTTError) {
        try publish(message)
    }

    public func subscribe(_ filter: String) throws(MQTTError) {
        try subscribe(filter, qos: .atLeastOnce)
    }
}
