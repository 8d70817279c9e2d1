/// What happens to an ``MQTTClient``'s connection, in order. A client with a publishing session has one connection
/// as far as these say: connected once both sessions are, disconnected when either goes (see
/// ``MQTTClient/init(configuration:publishingSession:loops:logger:)``).
public enum MQTTEvent: Hashable, Sendable {
    /// CONNACK success; `sessionPresent` says the broker resumed a session. Subscriptions were (re)sent.
    case connected(sessionPresent: Bool)
    /// The broker refused the connection; the client retries after its backoff.
    case connectionRefused(MQTTError)
    /// The connection ended: `nil` after ``MQTTClient/disconnect()``, else why; the client reconnects with backoff.
    case disconnected(MQTTError?)
    /// The broker refused a subscription of this filter.
    case subscriptionRefused(filter: String, MQTTError)
    /// Messages were refused because ``MQTTConfiguration/maximumPendingMessages`` waited, and now none waits: what
    /// could not be published may be published again.
    case queueDrained
}
