/// A wait of a test that ran out of time.
public struct WaitTimeout: Error, CustomStringConvertible {
    public var description: String

    public init(_ description: String) {
        self.description = description
    }
}

/// Polls `condition` every 10 ms until it holds; throws ``WaitTimeout`` naming `what` after `timeout`. It looks once
/// more after the deadline: a task that could not run for a while (a busy machine) must not report as missing what
/// happened meanwhile.
///
/// For what must happen. That something does not happen is never shown by waiting: wait for something that happens
/// after it (a later message on the same connection, a marker's round trip), then look.
public func waitUntil(
    _ what: String, timeout: Duration = .seconds(15), _ condition: () async throws -> Bool
) async throws {
    let deadline = ContinuousClock.now + timeout
    while try await !condition() {
        guard ContinuousClock.now < deadline else {
            if try await condition() { return }
            throw WaitTimeout("timed out after \(timeout) waiting for \(what)")
        }
        try await Task.sleep(for: .milliseconds(10))
    }
}
