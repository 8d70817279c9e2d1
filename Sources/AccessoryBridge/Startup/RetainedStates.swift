import MQTTClient
import Synchronization

/// The retained accessory and source states the bridge reads at start-up, collected on the network thread as they
/// arrive, until its marker comes back (or ``finish()`` is called: a timeout, a shutdown).
final class RetainedStates: Sendable {
    typealias Collected = (accessoryStates: [MQTTMessage], sourceStates: [MQTTMessage])

    private struct State {
        var accessoryStates: [MQTTMessage] = []
        var sourceStates: [MQTTMessage] = []
        var finished = false
        var waiter: CheckedContinuation<Collected, Never>?
    }

    private let marker: String
    private let sourcesPrefix: String
    private let state = Mutex(State())

    init(marker: String, sourcesPrefix: String) {
        self.marker = marker
        self.sourcesPrefix = sourcesPrefix
    }

    /// Called by the reader's client for each message.
    func receive(_ message: MQTTMessage) {
        guard message.topic != marker else {
            finish()
            return
        }
        state.withLock { state in
            guard !state.finished else { return }
            if message.topic.hasPrefix(sourcesPrefix) {
                state.sourceStates.append(message)
            } else {
                state.accessoryStates.append(message)
            }
        }
    }

    /// Ends the collection with what arrived.
    func finish() {
        let (waiter, collected) = state.withLock { state in
            state.finished = true
            defer { state.waiter = nil }
            return (state.waiter, (state.accessoryStates, state.sourceStates))
        }
        waiter?.resume(returning: collected)
    }

    /// Everything collected, once the marker came back; a cancelled task gets what arrived so far.
    func all() async -> Collected {
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let ready: Collected? = state.withLock { state in
                    guard !state.finished else { return (state.accessoryStates, state.sourceStates) }
                    state.waiter = continuation
                    return nil
                }
                if let ready { continuation.resume(returning: ready) }
            }
        } onCancel: {
            finish()
        }
    }
}
