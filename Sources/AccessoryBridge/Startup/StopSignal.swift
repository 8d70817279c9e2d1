import Synchronization

/// Signalled once; every wait returns from then on (a waiter whose task is cancelled returns at once).
final class StopSignal: Sendable {
    private struct State {
        var signalled = false
        var waiters: [Int: CheckedContinuation<Void, Never>] = [:]
        var nextWaiter = 0
    }

    private let state = Mutex(State())

    var isSignalled: Bool { state.withLock { $0.signalled } }

    func signal() {
        let waiters = state.withLock { state in
            state.signalled = true
            defer { state.waiters = [:] }
            return state.waiters.values
        }
        for waiter in waiters { waiter.resume() }
    }

    func wait() async {
        let id = state.withLock { state in
            defer { state.nextWaiter += 1 }
            return state.nextWaiter
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let waits = state.withLock { state in
                    guard !state.signalled, !Task.isCancelled else { return false }
                    state.waiters[id] = continuation
                    return true
                }
                if !waits { continuation.resume() }
            }
        } onCancel: {
            state.withLock { $0.waiters.removeValue(forKey: id) }?.resume()
        }
    }
}
