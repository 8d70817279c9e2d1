/// Tasks suspended until something happens (the first connection, the end of the network loop), kept in a
/// Mutex-protected ``ClientState``. Continuations are resumed by the caller after it released the lock.
struct Waiters<Value: Sendable> {
    private var waiting: [UInt64: CheckedContinuation<Value, Never>] = [:]
    /// Tasks cancelled before their continuation was registered.
    private var cancelled: Set<UInt64> = []
    private var nextID: UInt64 = 0

    mutating func makeID() -> UInt64 {
        nextID += 1
        return nextID
    }

    /// Registers a continuation; `false` when its task was cancelled already (the caller resumes it).
    mutating func add(_ id: UInt64, _ continuation: CheckedContinuation<Value, Never>) -> Bool {
        if cancelled.remove(id) != nil { return false }
        waiting[id] = continuation
        return true
    }

    /// The continuation of a cancelled task, to resume; or nothing yet, and the cancellation is remembered.
    mutating func cancel(_ id: UInt64) -> CheckedContinuation<Value, Never>? {
        if let continuation = waiting.removeValue(forKey: id) { return continuation }
        cancelled.insert(id)
        return nil
    }

    /// Every waiting continuation, to resume.
    mutating func removeAll() -> [CheckedContinuation<Value, Never>] {
        defer { waiting.removeAll() }
        return Array(waiting.values)
    }
}
