import MQTTClient
import Synchronization

/// A cluster's slot's session handler until the slot is rebuilt: its session connects first (cutting off an old
/// owner) while the rebuild's task owns the ``MessageProcessor``, so nothing reaches the processor until
/// ``release()``. Then, on the network thread, it starts the processor, hands it the connection events it kept, and
/// passes everything on.
///
/// The session reads nothing meanwhile (``MQTTClient/holdReading()``): a message arrives only when the connection
/// closes under the hold (libmosquitto reads what waits to learn why); it is kept, in order, for the processor.
// @unchecked Sendable: `held` is the network thread's (ThreadBound checks it, debug builds: MQTTClientHandler's calls
// come one at a time, on that thread); `released` is the atomic that hands the processor over from the rebuild's task.
final class HeldHandler: MQTTClientHandler, @unchecked Sendable {
    private let processor: MessageProcessor
    private let released = Atomic(false)
    private var held = ThreadBound(Held())

    /// What the network thread keeps until the processor is its own.
    private struct Held {
        var forwarding = false
        var events: [MQTTEvent] = []
        var messages: [MQTTMessage] = []
    }

    init(_ processor: MessageProcessor) {
        self.processor = processor
    }

    /// The processor is rebuilt: the network thread may have it (call before `MQTTClient.resumeReading()`).
    func release() {
        released.store(true, ordering: .releasing)
    }

    /// Whether the processor is the network thread's now; the first time, it starts it with what was kept.
    private func forwards() -> Bool {
        if held.forwarding { return true }
        guard released.load(ordering: .acquiring) else { return false }
        held.forwarding = true
        processor.started()
        for event in held.events { processor.event(event) }
        for message in held.messages { processor.received(message) }
        held.events = []
        held.messages = []
        return true
    }

    func started() {
        held.claim()
    }

    func received(_ message: MQTTMessage) {
        if forwards() { processor.received(message) } else { held.messages.append(message) }
    }

    func event(_ event: MQTTEvent) {
        if forwards() { processor.event(event) } else { held.events.append(event) }
    }

    func timeUntilWake() -> Duration? {
        if held.forwarding { return processor.timeUntilWake() }
        // Released: a wake-up at once hands the processor over.
        return released.load(ordering: .acquiring) ? .zero : nil
    }

    func wake() {
        if forwards() { processor.wake() }
    }

    /// Called after the network thread ended (from the thread that closed the client): nothing of `held` is touched.
    func closed() {
        processor.closed()
    }
}
