#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A joinable OS thread for libmosquitto's network loop, which blocks (in `poll` and in the TCP connect) and so must
/// not run on Swift's cooperative pool. Whether the caller is that thread is its session's ``LoopContext/isCurrent``.
// @unchecked Sendable: `pthread_t` is a plain identifier; ClientCore hands it out exactly once (under its Mutex)
// to the one caller that joins or detaches it.
struct NetworkThread: @unchecked Sendable {
    private let thread: pthread_t

    /// Starts `body` on a new thread.
    static func start(_ body: @escaping @Sendable () -> Void) throws(MQTTError) -> NetworkThread {
        let start = Unmanaged.passRetained(ThreadStart(body)).toOpaque()
        #if canImport(Darwin)
        var thread: pthread_t?
        let rc = pthread_create(&thread, nil, { ThreadStart.run($0) }, start)
        #else
        var thread = pthread_t()
        let rc = pthread_create(&thread, nil, { ThreadStart.run($0!) }, start)
        #endif
        guard rc == 0 else {
            Unmanaged<ThreadStart>.fromOpaque(start).release()
            throw MQTTError(kind: .system, code: rc, message: MosquittoLibrary.systemErrorText(rc))
        }
        #if canImport(Darwin)
        return NetworkThread(thread: thread!)
        #else
        return NetworkThread(thread: thread)
        #endif
    }

    /// Waits for the thread to end.
    func join() {
        _ = pthread_join(thread, nil)
    }

    /// Lets the system reclaim the thread when it ends, for a thread nobody will join.
    func detach() {
        _ = pthread_detach(thread)
    }
}

/// The closure a new thread runs, passed through `pthread_create`'s argument.
private final class ThreadStart {
    let body: @Sendable () -> Void

    init(_ body: @escaping @Sendable () -> Void) {
        self.body = body
    }

    static func run(_ argument: UnsafeMutableRawPointer) -> UnsafeMutableRawPointer? {
        let start = Unmanaged<ThreadStart>.fromOpaque(argument).takeRetainedValue()
        start.body()
        return nil
    }
}
