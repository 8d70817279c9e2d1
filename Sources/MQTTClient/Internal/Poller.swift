import CMosquitto

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The descriptors a ``NetworkLoop`` waits on, each registered once with a token and changed only when what it
/// waits for changes: the loop's wake pipe and its sessions' sockets. Waiting costs what is ready, not what is
/// registered (epoll on Linux; elsewhere `poll` over the registered set), so that a loop can run a member's hundreds of
/// slots. Used by the loop's thread only.
///
/// A token is registered by descriptor number, and libmosquitto closes and opens sockets on its own: a number can come
/// back for another session's socket. So a session forgets a socket only while it is still that session's
/// (``NetworkLoop`` checks `mosquitto_socket`); epoll forgets a closed descriptor by itself.
final class Poller {
    /// What a descriptor is waited for.
    struct Interest: Equatable {
        var descriptor: Int32
        var read: Bool
        var write: Bool
        /// Which connection of its session the descriptor is (a socket closed and opened again often gets the same
        /// number, and must be registered again: epoll forgot it).
        var connection = 0
    }

    /// What a wait found for one token.
    struct Readiness: OptionSet {
        let rawValue: UInt8
        static let readable = Readiness(rawValue: 1)
        static let writable = Readiness(rawValue: 2)
        /// Hung up, failed, or closed by the peer (reported whether or not reading was asked for: a session that
        /// leaves what arrives for later still hears at once that its connection ended).
        static let failed = Readiness(rawValue: 4)
    }

    #if os(Linux)
    private let epoll: Int32
    private var tokens = [UInt64](repeating: 0, count: 64)
    private var events = [UInt32](repeating: 0, count: 64)

    init() throws(MQTTError) {
        epoll = epoll_create1(Int32(EPOLL_CLOEXEC))
        guard epoll >= 0 else { throw Self.systemError(errno) }
    }

    deinit {
        close(epoll)
    }

    /// Starts waiting for `interest` under `token`, or changes what is waited for (`registered`: it was registered
    /// before, and may since have been closed and opened again under the same number).
    func watch(_ interest: Interest, token: UInt64, registered: Bool) {
        let mask =
            (interest.read ? EPOLLIN.rawValue : 0) | (interest.write ? EPOLLOUT.rawValue : 0) | EPOLLRDHUP.rawValue
        let first = registered ? EPOLL_CTL_MOD : EPOLL_CTL_ADD
        if cmosquitto_epoll_control(epoll, first, interest.descriptor, mask, token) == 0 { return }
        // Closed and opened again (gone from the set), or registered before by another session that lost it.
        let second = registered ? EPOLL_CTL_ADD : EPOLL_CTL_MOD
        _ = cmosquitto_epoll_control(epoll, second, interest.descriptor, mask, token)
    }

    /// Stops waiting for `descriptor` (still open).
    func forget(_ descriptor: Int32) {
        _ = cmosquitto_epoll_control(epoll, EPOLL_CTL_DEL, descriptor, 0, 0)
    }

    /// Waits up to `milliseconds` (-1: for ever) and calls `ready` for each token with something ready (at most 64
    /// a call; the next wait returns the others at once). Returns errno when the wait failed (EINTR is no failure).
    func wait(milliseconds: Int32, _ ready: (UInt64, Readiness) -> Void) -> Int32? {
        let count = tokens.withUnsafeMutableBufferPointer { tokens in
            events.withUnsafeMutableBufferPointer { events in
                cmosquitto_epoll_wait(epoll, tokens.baseAddress, events.baseAddress, milliseconds)
            }
        }
        guard count >= 0 else {
            let code = errno
            return code == EINTR ? nil : code
        }
        for index in 0..<Int(count) {
            let bits = events[index]
            var readiness: Readiness = []
            if bits & EPOLLIN.rawValue != 0 { readiness.insert(.readable) }
            if bits & EPOLLOUT.rawValue != 0 { readiness.insert(.writable) }
            if bits & (EPOLLHUP.rawValue | EPOLLERR.rawValue | EPOLLRDHUP.rawValue) != 0 { readiness.insert(.failed) }
            ready(tokens[index], readiness)
        }
        return nil
    }
    #else
    private var registered: [Int32: (token: UInt64, interest: Interest)] = [:]

    init() throws(MQTTError) {}

    func watch(_ interest: Interest, token: UInt64, registered _: Bool) {
        registered[interest.descriptor] = (token, interest)
    }

    func forget(_ descriptor: Int32) {
        registered[descriptor] = nil
    }

    func wait(milliseconds: Int32, _ ready: (UInt64, Readiness) -> Void) -> Int32? {
        let entries = Array(registered.values)
        var descriptors = entries.map {
            pollfd(
                fd: $0.interest.descriptor,
                events: Int16($0.interest.read ? POLLIN : 0) | Int16($0.interest.write ? POLLOUT : 0), revents: 0)
        }
        guard poll(&descriptors, nfds_t(descriptors.count), milliseconds) >= 0 else {
            let code = errno
            return code == EINTR ? nil : code
        }
        for (entry, descriptor) in zip(entries, descriptors) where descriptor.revents != 0 {
            var readiness: Readiness = []
            if descriptor.revents & Int16(POLLIN) != 0 { readiness.insert(.readable) }
            if descriptor.revents & Int16(POLLOUT) != 0 { readiness.insert(.writable) }
            if descriptor.revents & Int16(POLLHUP | POLLERR | POLLNVAL) != 0 { readiness.insert(.failed) }
            ready(entry.token, readiness)
        }
        return nil
    }
    #endif

    static func systemError(_ code: Int32) -> MQTTError {
        MQTTError(kind: .system, code: code, message: MosquittoLibrary.systemErrorText(code))
    }
}
