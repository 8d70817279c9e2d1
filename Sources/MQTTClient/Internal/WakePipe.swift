import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A non-blocking pipe that wakes a ``NetworkLoop``'s thread from its wait, when another thread gave one of its
/// sessions work (a packet queued, a stop, a handler's wake-up) or a session joined. (libmosquitto's own wake-up pipe
/// is private to `mosquitto_loop`, which this client does not use: see ``NetworkLoop``.)
final class WakePipe: Sendable {
    let readEnd: Int32
    private let writeEnd: Int32
    /// A signal was written and not drained yet: another one would wake nobody (a thread that publishes for a
    /// session signals at most once per turn of its loop).
    private let signalled = Atomic(false)

    init() throws(MQTTError) {
        var ends: [Int32] = [-1, -1]
        guard pipe(&ends) == 0 else {
            let code = errno
            throw MQTTError(kind: .system, code: code, message: MosquittoLibrary.systemErrorText(code))
        }
        for end in ends {
            _ = fcntl(end, F_SETFL, fcntl(end, F_GETFL) | O_NONBLOCK)
            _ = fcntl(end, F_SETFD, FD_CLOEXEC)
        }
        readEnd = ends[0]
        writeEnd = ends[1]
    }

    deinit {
        close(readEnd)
        close(writeEnd)
    }

    /// Wakes the network thread (a full pipe already will).
    func signal() {
        guard !signalled.exchange(true, ordering: .sequentiallyConsistent) else { return }
        var byte: UInt8 = 1
        _ = write(writeEnd, &byte, 1)
    }

    /// Empties the pipe after a wake-up, before the woken thread looks at what changed: a signal after this writes
    /// again. (One that comes between the read and the flag's reset writes nothing, and needs nothing: the thread
    /// looks at what changed after this returns.)
    func drain() {
        var buffer = [UInt8](repeating: 0, count: 64)
        while read(readEnd, &buffer, buffer.count) > 0 {}
        signalled.store(false, ordering: .sequentiallyConsistent)
    }

}
