#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// What only a session's network thread uses: the connection's state machine, the handler, and the loop's own
/// bookkeeping. Each is checked where it is touched (as swift-nio's `NIOLoopBound` does): in a debug build, touching
/// it from another thread stops the program. The handler and `receiving` are set once before that thread starts, and
/// read by ``ClientCore/release()`` after it ended.
// @unchecked Sendable: every mutable field below but `_handler` and `_receiving` is read and written on the network
// thread only, which `owned` checks (debug builds); those two are set before that thread starts and read after it
// ended (above), unchecked; `thread` itself is written by that thread first thing (or, for a publishing session, by its
// receiving session's thread before it runs it) and only compared with the caller's thread after that.
final class LoopContext: @unchecked Sendable {
    /// The network thread, once it runs.
    var thread: pthread_t?

    private var _handler: (any MQTTClientHandler)?
    private var _machine: ConnectionStateMachine
    private var _connack: Int32?
    private weak var _receiving: ClientCore?
    private var _receivingUp = false
    private var _publishingUp = false
    private var _sessionPresent = false
    private var _pausedSince: ContinuousClock.Instant?
    private var _link: PublishingLink?
    private var _packetsHandled = 0
    private var _finished = false

    init(policy: ConnectionStateMachine.Policy) {
        _machine = ConnectionStateMachine(policy: policy)
    }

    /// Whether the caller is the network thread.
    var isCurrent: Bool {
        guard let thread else { return false }
        return pthread_equal(thread, pthread_self()) != 0
    }

    /// Stops a debug build when the caller is not the network thread: what follows is that thread's alone.
    @inline(__always)
    private func owned(_ what: StaticString = #function) {
        assert(thread == nil || isCurrent, "\(what) used off its session's network thread")
    }

    /// The handler: set by start() before the network thread exists, then used on that thread alone (and by
    /// release(), after it ended).
    var handler: (any MQTTClientHandler)? {
        get { _handler }
        set { _handler = newValue }
    }

    /// A publishing session's: the session it publishes for, whose network thread runs it and hands its events on
    /// (set before that thread starts, like `handler`).
    var receiving: ClientCore? {
        get { _receiving }
        set { _receiving = newValue }
    }

    /// The connection's lifecycle (``ConnectionStateMachine``).
    var machine: ConnectionStateMachine {
        get { owned(); return _machine }
        _modify { owned(); yield &_machine }
    }

    /// The flags of a CONNACK success whose handling in libmosquitto is not over (see `ClientCore.finishConnecting()`).
    var connack: Int32? {
        get { owned(); return _connack }
        set { owned(); _connack = newValue }
    }

    /// A receiving session's: which of the two sessions are connected, and whether the receiving one resumed its
    /// session.
    var receivingUp: Bool {
        get { owned(); return _receivingUp }
        set { owned(); _receivingUp = newValue }
    }

    var publishingUp: Bool {
        get { owned(); return _publishingUp }
        set { owned(); _publishingUp = newValue }
    }

    var sessionPresent: Bool {
        get { owned(); return _sessionPresent }
        set { owned(); _sessionPresent = newValue }
    }

    /// A receiving session's: since when it has not read, waiting for its publishing session's queue to shrink.
    var pausedSince: ContinuousClock.Instant? {
        get { owned(); return _pausedSince }
        set { owned(); _pausedSince = newValue }
    }

    /// A receiving session's: its publishing session's connection, run beside its own.
    var link: PublishingLink? {
        get { owned(); return _link }
        set { owned(); _link = newValue }
    }

    /// How many packets libmosquitto handed to a callback: whether a read found one.
    var packetsHandled: Int {
        get { owned(); return _packetsHandled }
        set { owned(); _packetsHandled = newValue }
    }

    /// The state machine said the loop ends.
    var finished: Bool {
        get { owned(); return _finished }
        set { owned(); _finished = newValue }
    }
}
