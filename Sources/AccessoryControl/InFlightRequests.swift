import AccessoryModel
import Synchronization

/// How many of each accessory's requests are on the wire, and who waits for none to be: the answer to a rebirth
/// request waits, so that its update cannot undo a report whose result has not come yet. Every request ends (its
/// answer, a failure to send, or its timeout), so a wait ends too.
final class InFlightRequests: Sendable {
    private struct State {
        var counts: [AccessoryID: Int] = [:]
        var waiters: [AccessoryID: [CheckedContinuation<Void, Never>]] = [:]
    }

    private let state = Mutex(State())

    /// Runs `body`, one of `id`'s requests on the wire meanwhile.
    func run<T>(for id: AccessoryID, _ body: () async throws(AccessoryControlError) -> T)
        async throws(AccessoryControlError) -> T
    {
        state.withLock { $0.counts[id, default: 0] += 1 }
        defer { ended(id) }
        return try await body()
    }

    /// Returns once none of `id`'s requests is on the wire.
    func untilNone(of id: AccessoryID) async {
        await withCheckedContinuation { continuation in
            let none = state.withLock { state in
                guard state.counts[id] != nil else { return true }
                state.waiters[id, default: []].append(continuation)
                return false
            }
            if none { continuation.resume() }
        }
    }

    /// How many of `id`'s requests are on the wire.
    func count(of id: AccessoryID) -> Int {
        state.withLock { $0.counts[id] ?? 0 }
    }

    private func ended(_ id: AccessoryID) {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            if let count = state.counts[id], count > 1 {
                state.counts[id] = count - 1
                return []
            }
            state.counts[id] = nil
            return state.waiters.removeValue(forKey: id) ?? []
        }
        for waiter in waiters { waiter.resume() }
    }
}
