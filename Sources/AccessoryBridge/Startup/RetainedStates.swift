import Dispatch
import MQTTClient
import Synchronization

/// The start-up read of the retained accessory and source states, in two stages that run side by side: the reader's
/// network thread decodes each state as it arrives (``receive(_:)``), and the task that owns the ``MessageProcessor``
/// meanwhile takes them back a batch at a time (``restoreAll()``), until the marker comes back (or ``finish()`` is
/// called: a timeout, a shutdown). At most ``batchesAhead`` batches wait between the two (there may be a million
/// states): the reader waits for room beyond.
///
/// Two stages because a restart is bound by the bridge's one thread, not by the broker: at 200,000 accessories the
/// bridge used 2.2–2.5 s of CPU in a 2.5–2.9 s rebuild, the broker 0.7 s; decoding is about a fifth of the bridge's
/// share, taking back the states another.
///
/// The caller closes the reader once ``finished()`` returned (which joins its thread), then calls ``endOfInput()``;
/// ``restoreAll()`` returns once every batch is in, and the processor is the caller's again.
final class RetainedStates: Sendable {
    static let batchSize = 1_024
    /// Batches decoded ahead of restoring, at most (16,384 states).
    static let batchesAhead = 16

    private struct State {
        var finished = false
        var waiter: CheckedContinuation<Void, Never>?
        /// Being filled by the reader's thread.
        var batch: [MessageProcessor.RetainedMessage] = []
        /// ``restoreAll()`` ended: the reader waits for room no longer.
        var stopped = false
    }

    private let marker: String
    private let processor: MessageProcessor
    private let state = Mutex(State())
    private let batches: AsyncStream<[MessageProcessor.RetainedMessage]>
    private let continuation: AsyncStream<[MessageProcessor.RetainedMessage]>.Continuation
    /// Counts the batches that may still be sent ahead.
    private let room = DispatchSemaphore(value: batchesAhead)

    init(marker: String, processor: MessageProcessor) {
        self.marker = marker
        self.processor = processor
        (batches, continuation) = AsyncStream.makeStream()
    }

    /// Called by the reader's client for each message, on its network thread.
    func receive(_ message: MQTTMessage) {
        guard message.topic != marker else {
            finish()
            return
        }
        let decoded = processor.decodeRetained(message)
        let full: [MessageProcessor.RetainedMessage]? = state.withLock { state in
            // Nothing is taken once the read ended: the caller may have gone on.
            guard !state.finished else { return nil }
            state.batch.append(decoded)
            guard state.batch.count >= Self.batchSize else { return nil }
            defer { state.batch = [] }
            return state.batch
        }
        if let full {
            room.wait()
            // Restoring ended early (a shutdown): nothing more is sent, and the next wait returns too.
            if state.withLock({ $0.stopped }) {
                room.signal()
                return
            }
            continuation.yield(full)
        }
    }

    /// Takes back every batch as it comes, on the caller's task, which owns the processor meanwhile; returns once
    /// ``endOfInput()`` was called and every batch is in, or when the task is cancelled.
    func restoreAll() async {
        for await batch in batches {
            for message in batch { processor.restore(message) }
            room.signal()
        }
        state.withLock { $0.stopped = true }
        room.signal()
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

    /// The reader is closed (its thread joined): sends what it decoded last and ends the batches.
    func endOfInput() {
        let rest = state.withLock { state in
            state.finished = true
            defer { state.batch = [] }
            return state.batch
        }
        if !rest.isEmpty { continuation.yield(rest) }
        continuation.finish()
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
