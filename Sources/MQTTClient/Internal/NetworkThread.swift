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

    /// Starts `body` on a new thread named `name` (what `top -H`, `ps -L` and a profiler show for it; the system keeps
    /// its first 15 bytes).
    static func start(named name: String, _ body: @escaping @Sendable () -> Void) throws(MQTTError) -> NetworkThread {
        let start = Unmanaged.passRetained(ThreadStart(name: name, body)).toOpaque()
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
    let name: String
    let body: @Sendable () -> Void

    init(name: String, _ body: @escaping @Sendable () -> Void) {
        self.name = name
        self.body = body
    }

    static func run(_ argument: UnsafeMutableRawPointer) -> UnsafeMutableRawPointer? {
        let start = Unmanaged<ThreadStart>.fromOpaque(argument).takeRetainedValue()
        // Otherwise the thread keeps its creator's name: a dispatch or cooperative-pool thread's
        // ("…root.default-qos"), which says nothing of what the busiest thread of a bridge does.
        nameTheCurrentThread(start.name)
        start.body()
        return nil
    }
}

/// Names the calling thread (its first 15 bytes). On Linux through /proc, as glibc's `pthread_setname_np` does for
/// another thread (Swift's Glibc module does not show that GNU function); a failure leaves the name as it was.
private func nameTheCurrentThread(_ name: String) {
    #if canImport(Darwin)
    _ = pthread_setname_np(name)
    #else
    let descriptor = open("/proc/thread-self/comm", O_WRONLY | O_CLOEXEC)
    guard descriptor >= 0 else { return }
    let bytes = Array(name.utf8.prefix(15))
    _ = bytes.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
    close(descriptor)
    #endif
}
