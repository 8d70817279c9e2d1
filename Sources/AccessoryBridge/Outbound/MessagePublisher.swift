import MQTTClient
import Synchronization

/// Where the bridge's messages go: the MQTT client in production, a recorder in tests.
public protocol MessagePublisher: Sendable {
    /// Queues `message` for sending.
    func send(_ message: MQTTMessage) throws(MQTTError)
}

extension MQTTClient: MessagePublisher {
    public func send(_ message: MQTTMessage) throws(MQTTError) {
        try publish(message)
    }
}

/// A publisher bound after it is handed out: the client needs the bridge's message handler to exist first, and the
/// handler needs somewhere to publish.
final class LateBoundPublisher: MessagePublisher {
    private let target = Mutex<(any MessagePublisher)?>(nil)

    func bind(to publisher: any MessagePublisher) {
        target.withLock { $0 = publisher }
    }

    func send(_ message: MQTTMessage) throws(MQTTError) {
        guard let publisher = target.withLock({ $0 }) else {
            throw MQTTError(kind: .invalidArgument, code: 0, message: "the bridge is not connected to a client yet")
        }
        try publisher.send(message)
    }
}
