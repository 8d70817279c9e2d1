import MQTTClient
import Synchronization

/// The start-up read of the retained accessory and source states: hands each to the ``MessageProcessor`` as it
/// arrives, on the reader's network thread (nothing is collected: there may be a million), until the marker comes
/// back (or ``finish()`` is called: a timeout, a shutdown).
///
/// The reader's network thread owns the processor meanwhile; the caller takes it back once ``finished()`` returned
/// and the reader is closed (which joins that thread).
final class RetainedStates: Sendable {
    private struct State {
        var finished = false
        var waiter: CheckedContinuation<Void, Never>?
    }

    private let marker: String
    private let processor: MessageProcessor
    private let state = Mutex(State())

    init(marker: String, processor: MessageProcessor) {
        self.marker = marker
        self.processor = processor
    }

    /// Called by the reader's client for each message.
    func receive(_ message: MQTTMessage) {
        guard message.topic != marker else {
            finish()
            return
        }
        // Checked on this thread before each state: nothing is restored once the caller may have taken over.
        guard !state.withLock({ $0.finished }) else { return }
        processor.restore(message)
    }

    /// Ends the read with what arrived.
    func finish() {
        let waiter = state.withLock { state in
            state.finished = true
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume()
    }

    /// Returns once the marker came back or ``finish()`` was called; a cancelled task returns at once.
    func finished() async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let done: Bool = state.withLock { state in
                    guard !state.finished else { return true }
                    state.waiter = continuation
                    return false
                }
                if done { continuation.resume() }
            }
        } onCancel: {
            finish()
        }
    }
}
