import MQTTClient
import Synchronization

/// A cluster's slot's session handler until the slot is rebuilt: its session connects first (cutting off an old
/// owner) while the rebuild's task owns the ``MessageProcessor``, so nothing reaches the processor until
/// ``release()``. Then, on the network thread, it starts the processor, hands it the connection events it kept, and
/// passes everything on.
///
/// The session reads nothing meanwhile (``MQTTClient/holdReading()``): a message arrives only when the connection
/// closes under the hold (libmosquitto reads what waits to learn why); it is kept, in order, for the processor.
// @unchecked Sendable: `forwarding`, `events` and `messages` are touched only by the network thread of the client
// this is the handler of (MQTTClientHandler's calls come one at a time, on that thread); `released` is the atomic
// that hands the processor over from the rebuild's task.
final class HeldHandler: MQTTClientHandler, @unchecked Sendable {
    private let processor: MessageProcessor
    private let released = Atomic(false)
    private var forwarding = false
    private var events: [MQTTEvent] = []
    private var messages: [MQTTMessage] = []

    init(_ processor: MessageProcessor) {
        self.processor = processor
    }

    /// The processor is rebuilt: the network thread may have it (call before `MQTTClient.resumeReading()`).
    func release() {
        released.store(true, ordering: .releasing)
    }

    /// Whether the processor is the network thread's now; the first time, it starts it with what was kept.
    private func forwards() -> Bool {
        if forwarding { return true }
        guard released.load(ordering: .acquiring) else { return false }
        forwarding = true
        processor.started()
        for event in events { processor.event(event) }
        for message in messages { processor.received(message) }
        events = []
        messages = []
        return true
    }

    func started() {}

    func received(_ message: MQTTMessage) {
        if forwards() { processor.received(message) } else { messages.append(message) }
    }

    func event(_ event: MQTTEvent) {
        if forwards() { processor.event(event) } else { events.append(event) }
    }

    func timeUntilWake() -> Duration? {
        if forwarding { return processor.timeUntilWake() }
        // Released: a wake-up at once hands the processor over.
        return released.load(ordering: .acquiring) ? .zero : nil
    }

    func wake() {
        if forwards() { processor.wake() }
    }

    func closed() {
        if forwarding { processor.closed() }
    }
}
