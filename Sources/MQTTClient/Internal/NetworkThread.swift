#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// An OS thread for a ``NetworkLoop``, which blocks (in its wait and in a TCP connect) and so must not run on Swift's
/// cooperative pool. The loop detaches it at once: its sessions, not the thread, say when they are done. Whether the
/// caller is that thread is a session's ``LoopContext/isCurrent``.
// @unchecked Sendable: `pthread_t` is a plain identifier, detached once by the loop that started the thread.
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

    /// Lets the system reclaim the thread when it ends.
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
