import AccessoryModel
import Synchronization

/// Requests waiting for the bridge's answer, by key (a correlation or a request id): each completes exactly once,
/// with its answer, a failure to send, or `.unknown` when no answer came in time.
final class PendingRequests<Key: Hashable & Sendable, Answer: Sendable>: Sendable {
    typealias Outcome = Result<Answer, AccessoryControlError>
    private let waiting = Mutex<[Key: CheckedContinuation<Outcome, Never>]>([:])

    /// Registers `key`, runs `publish`, and waits for ``finish(_:with:)`` or `timeout`.
    func send(
        _ key: Key, timeout: Duration, timeoutReason: @escaping @Sendable () -> String,
        publish: () throws -> Void
    ) async -> Outcome {
        await withCheckedContinuation { continuation in
            waiting.withLock { $0[key] = continuation }
            do {
                try publish()
            } catch {
                finish(key, with: .failure(.unknown(reason: "cannot send the request: \(error)")))
                return
            }
            // Client side, one request at a time per caller: a timer task per request is fine here.
            Task { [weak self] in
                try? await Task.sleep(for: timeout)
                self?.finish(key, with: .failure(.unknown(reason: timeoutReason())))
            }
        }
    }

    /// Completes the request `key` if it still waits (a late or repeated answer is dropped).
    func finish(_ key: Key, with outcome: Outcome) {
        waiting.withLock { $0.removeValue(forKey: key) }?.resume(returning: outcome)
    }

    /// Completes every request that waits with `outcome`.
    func finishAll(with outcome: Outcome) {
        for continuation in waiting.withLock({ waiting in defer { waiting.removeAll() }; return Array(waiting.values) }) {
            continuation.resume(returning: outcome)
        }
    }
}
