#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The one thread allowed to touch a state once it was handed over (a ``MessageProcessor``'s, to its client's network
/// thread), checked where the state is touched, as swift-nio's `NIOLoopBound` checks its event loop: in a debug build,
/// another thread stops the program. Before ``claim()`` (while restoring, or driven by a test) nothing is checked.
struct Owner {
    private var thread: pthread_t?

    /// The calling thread owns the state from now on.
    mutating func claim() {
        thread = pthread_self()
    }

    /// Stops a debug build when a thread other than the owner touches the state.
    @inline(__always)
    func check(_ what: StaticString = #function) {
        assert(thread.map { pthread_equal($0, pthread_self()) != 0 } ?? true, "\(what) called off the owning thread")
    }
}
