/// Runs `body`, a test's CPU-bound work (thousands of random events, hashes or encodings), at background priority,
/// and returns once it has.
///
/// Swift Testing runs every test at once on Swift's cooperative pool, which has one thread per core, and a synchronous
/// test holds its thread until it returns. On two cores, the unit tests' ten seconds of CPU held both threads while
/// the integration tests' in-process bridges and peers waited: under `make test-stress`, ~30 tests at a time failed
/// their 30 s waits (`StallWatch` caught the pool's threads in these tests). Work of background priority runs on
/// threads of its own, which work of the default priority does not wait behind (measured here: a default-priority
/// task waited up to 5.9 s behind four busy default-priority ones, and 4 ms behind four busy background ones).
///
/// The body runs in a task that inherits the test's task-local values, so `#expect` in it records against the test.
public func inTheBackground(_ body: @escaping @Sendable () throws -> Void) async throws {
    try await Task(priority: .background, operation: body).value
}
