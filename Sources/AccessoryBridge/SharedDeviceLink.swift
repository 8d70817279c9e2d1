import AccessoryModel
import Synchronization

/// In a cluster, how a slot's ``MessageProcessor`` and its member's etcd side talk about the slot's shared devices
/// (docs/scale-out.md, "Shared devices"). The processor hands its requests over as it runs its actions (``send``,
/// which must not block); the member posts etcd's answers and its watch's news (``post(_:)``), which the processor
/// takes on its own thread before its next message.
public final class SharedDeviceLink: Sendable {
    /// Runs a request; called on the processor's thread, so it hands the work on and returns.
    public let send: @Sendable (SharedDeviceRequest) -> Void
    private let inbox = Mutex<[SharedDeviceEvent]>([])
    private let waiting = Atomic(false)
    private let wakeUp = Mutex<(@Sendable () -> Void)?>(nil)

    public init(send: @escaping @Sendable (SharedDeviceRequest) -> Void) {
        self.send = send
    }

    /// Hands events to the processor (from any thread), and wakes its thread.
    public func post(_ events: [SharedDeviceEvent]) {
        guard !events.isEmpty else { return }
        inbox.withLock { $0 += events }
        waiting.store(true, ordering: .releasing)
        wakeUp.withLock { $0 }?()
    }

    /// Whether events wait for the processor.
    var hasEvents: Bool { waiting.load(ordering: .acquiring) }

    /// The events posted so far, in order (none without a lock when nothing waits).
    func take() -> [SharedDeviceEvent] {
        guard hasEvents else { return [] }
        waiting.store(false, ordering: .releasing)
        return inbox.withLock { events in
            defer { events.removeAll() }
            return events
        }
    }

    /// What wakes the processor's thread when events are posted.
    func onPost(_ wake: @escaping @Sendable () -> Void) {
        wakeUp.withLock { $0 = wake }
    }
}
