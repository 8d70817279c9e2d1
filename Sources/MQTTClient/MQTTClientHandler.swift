/// What an ``MQTTClient`` calls on its network thread, one call at a time and in order: the thread that owns the
/// handler's state, so that the handler needs no lock of its own.
///
/// A call must not block for long: every message of the connection waits behind it. Messages arrive already copied
/// out of libmosquitto (which acknowledged a QoS 1 message before the call).
public protocol MQTTClientHandler: AnyObject, Sendable {
    /// A message of a subscription.
    func received(_ message: MQTTMessage)
    /// A connection change.
    func event(_ event: MQTTEvent)
    /// How long until the network thread should call ``wake()``, or `nil` for no wake-up. Asked twice at each turn
    /// of the loop (before it waits, and after what it read), connected or not.
    func timeUntilWake() -> Duration?
    /// The time ``timeUntilWake()`` asked for came: run what is due.
    func wake()
    /// The network thread starts, before any other call: the thread that owns the handler's state from now on.
    func started()
    /// The client was closed: nothing more will be called.
    func closed()
}

extension MQTTClientHandler {
    public func started() {}
    public func event(_ event: MQTTEvent) {}
    public func timeUntilWake() -> Duration? { nil }
    public func wake() {}
    public func closed() {}
}

/// A handler made of closures, for clients without deadlines of their own.
final class ClosureHandler: MQTTClientHandler {
    private let onMessage: @Sendable (MQTTMessage) -> Void
    private let onEvent: @Sendable (MQTTEvent) -> Void
    private let onClose: @Sendable () -> Void

    init(
        onMessage: @escaping @Sendable (MQTTMessage) -> Void, onEvent: @escaping @Sendable (MQTTEvent) -> Void,
        onClose: @escaping @Sendable () -> Void
    ) {
        self.onMessage = onMessage
        self.onEvent = onEvent
        self.onClose = onClose
    }

    func received(_ message: MQTTMessage) { onMessage(message) }
    func event(_ event: MQTTEvent) { onEvent(event) }
    func closed() { onClose() }
}
