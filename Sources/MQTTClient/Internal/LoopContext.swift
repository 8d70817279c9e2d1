/// What only a session's network thread uses: the connection's state machine and the loop's own bookkeeping, in a
/// ``ThreadBound`` value that checks every access (debug builds) and that callers reach as `loop.machine`,
/// `loop.connack`, …. The handler and `receiving` are set once before that thread starts, and read by
/// ``ClientCore/release()`` after it ended.
// @unchecked Sendable: `state` is the network thread's (ThreadBound checks it, debug builds); `handler` and
// `receiving` are set before that thread starts and read after it ended (above), unchecked.
@dynamicMemberLookup final class LoopContext: @unchecked Sendable {
    /// The handler: set by start() before the network thread exists, then used on that thread alone (and by
    /// release(), after it ended).
    var handler: (any MQTTClientHandler)?
    /// A publishing session's: the session it publishes for, whose network thread runs it and hands its events on
    /// (set before that thread starts, like `handler`).
    weak var receiving: ClientCore?
    /// The network thread's: claimed by it first thing (or, for a publishing session, by its receiving session's
    /// thread before it runs it).
    var state: ThreadBound<State>

    struct State {
        /// The connection's lifecycle (``ConnectionStateMachine``).
        var machine: ConnectionStateMachine
        /// The flags of a CONNACK success whose handling in libmosquitto is not over (see
        /// `ClientCore.finishConnecting()`).
        var connack: Int32?
        /// A receiving session's: which of the two sessions are connected, and whether the receiving one resumed its
        /// session.
        var receivingUp = false
        var publishingUp = false
        var sessionPresent = false
        /// A receiving session's: since when it has not read, waiting for its publishing session's queue to shrink.
        var pausedSince: ContinuousClock.Instant?
        /// A receiving session's: its publishing session's connection, run beside its own.
        var link: PublishingLink?
        /// Whether libmosquitto was given the broker's address (`mosquitto_connect_bind_v5`, once).
        var addressGiven = false
        /// How many attempts to connect were made: each opens a new socket.
        var connections = 0
        /// How many packets libmosquitto handed to a callback: whether a read found one.
        var packetsHandled = 0
        /// How many messages of QoS 1 or 2 were received since the session last wrote: libmosquitto acknowledges each.
        var acknowledgementsOwed = 0
        /// A receiving session's with a publishing session: since when what it has to write has waited
        /// (``ClientCore/writesWait()``).
        var writesWaitSince: ContinuousClock.Instant?
        /// A receiving session's: its reader holds bytes and it may read them, as the last ``ClientCore/interest()``
        /// found: its next turn reads without its socket being readable.
        var readsHeldBytes = false
        /// The state machine said the session ends.
        var finished = false
        /// The loop corked its sockets for a batch of turns (``ClientCore/holdWritesOfTheTurns(_:)``).
        var writesHeld = false
        /// In its turn (``ClientCore/turn(_:)``; a publishing session: in its receiving session's): what the handler
        /// publishes is written before the turn ends.
        var turning = false
    }

    init(policy: ConnectionStateMachine.Policy) {
        state = ThreadBound(State(machine: ConnectionStateMachine(policy: policy)))
    }

    /// Whether the caller is the network thread.
    var isCurrent: Bool { state.isCurrent }

    subscript<Member>(dynamicMember member: WritableKeyPath<State, Member>) -> Member {
        get { state[dynamicMember: member] }
        _modify { yield &state[dynamicMember: member] }
    }
}
