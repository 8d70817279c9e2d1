/// One MQTT session's connection, as a pure state machine: each event (an attempt's outcome, a CONNACK, the end of a
/// connection, a stop, the time passing) and the time go in; what to do comes out, and the network thread only does
/// it (after postgres-nio's `ConnectionStateMachine`). It never touches libmosquitto, a socket or a clock, so that
/// every path, the backoff included, is tested without a broker.
///
/// ```
/// idle ──start──▶ connecting ──CONNACK ok──▶ opening ──handled──▶ connected
///                   │  ▲  │                                           │
///          failed / │  │  │ refused, ended                      ended │ stop
///                   ▼  │  ▼                                           ▼
///               backingOff (until)  ◀──────────────────────────  disconnecting (deadline) ──▶ closed
/// ```
///
/// The backoff starts at ``Policy/reconnectDelay`` and doubles up to ``Policy/maximumReconnectDelay``; a connection
/// that opened starts it over. A stop ends a wait at once, and a connection with a DISCONNECT (the broker then does
/// not publish the will) given up to ``Policy/disconnectTimeout`` to leave.
struct ConnectionStateMachine: Sendable {
    struct Policy: Hashable, Sendable {
        var reconnectDelay: Duration
        var maximumReconnectDelay: Duration
        /// How long a DISCONNECT may take to leave before the connection is dropped without it.
        var disconnectTimeout: Duration = .seconds(2)

        init(reconnectDelay: Duration, maximumReconnectDelay: Duration) {
            self.reconnectDelay = reconnectDelay
            self.maximumReconnectDelay = max(maximumReconnectDelay, reconnectDelay)
        }
    }

    enum Phase: Hashable, Sendable {
        /// Not started.
        case idle
        /// An attempt is under way: the socket is being opened, or the CONNACK awaited.
        case connecting
        /// The CONNACK said yes; libmosquitto is still handling it (it queues again what was in flight when the last
        /// connection ended, which nothing published later may overtake).
        case opening(sessionPresent: Bool)
        case connected
        /// Waiting before the next attempt.
        case backingOff(until: ContinuousClock.Instant)
        /// A DISCONNECT was sent, and may take until the deadline to leave; `wasOpen`: the connection had opened.
        case disconnecting(deadline: ContinuousClock.Instant, wasOpen: Bool)
        /// Done: the network loop lets go of the session.
        case closed

        /// Whether a connection is open or being made: its socket is the one to read and write.
        var hasConnection: Bool {
            switch self {
            case .connecting, .opening, .connected, .disconnecting: true
            case .idle, .backingOff, .closed: false
            }
        }
    }

    enum Action: Hashable, Sendable {
        /// Open a connection: the first attempt passes the CONNECT properties (libmosquitto keeps them for the
        /// attempts after).
        case connect(first: Bool)
        /// Send every remembered subscription again (from the CONNACK's callback, ahead of everything else).
        case resubscribe
        /// The connection is open to everything else: count it connected, release the waiters, tell the handler,
        /// send what waited.
        case open(sessionPresent: Bool)
        /// The broker refused the connection (it closes it next).
        case refused(MQTTError)
        /// An attempt failed before the broker answered; the next one comes at `retryAt`.
        case attemptFailed(MQTTError, retryAt: ContinuousClock.Instant)
        /// An open connection ended: `nil` when asked to (a stop), else why.
        case closedConnection(MQTTError?)
        /// Wait, then try again at this time.
        case retry(at: ContinuousClock.Instant)
        /// Send DISCONNECT (reason 0: the broker does not publish the will).
        case sendDisconnect
        /// The DISCONNECT did not leave in time: the connection is dropped without it (when the loop ends).
        case dropConnection
        /// The loop ends.
        case finish
    }

    let policy: Policy
    private(set) var phase = Phase.idle
    /// The next wait before an attempt.
    private var delay: Duration
    private var attempted = false
    private(set) var stopRequested = false
    /// The client drains before it stops (``MQTTClient/disconnect()``): a connection that ends now is not reopened,
    /// and that is no failure.
    private(set) var draining = false

    init(policy: Policy) {
        self.policy = policy
        delay = policy.reconnectDelay
    }

    /// Whether the connection is open to everything else.
    var isConnected: Bool { phase == .connected }

    /// When ``tick(at:)`` has something to do, if ever.
    var nextDeadline: ContinuousClock.Instant? {
        switch phase {
        case .backingOff(let until): until
        case .disconnecting(let deadline, _): deadline
        default: nil
        }
    }

    // MARK: Events

    /// The network thread starts.
    mutating func start() -> [Action] {
        guard phase == .idle else { return [] }
        if stopRequested {
            phase = .closed
            return [.finish]
        }
        return attempt()
    }

    /// The attempt could not open a connection (unreachable, TLS, a name that does not resolve).
    mutating func attemptFailed(_ error: MQTTError, at now: ContinuousClock.Instant) -> [Action] {
        guard phase == .connecting else { return [] }
        if stopRequested || draining {
            phase = .closed
            return [.finish]
        }
        let retryAt = backOff(at: now)
        return [.attemptFailed(error, retryAt: retryAt)]
    }

    /// The broker's CONNACK: `reason` 0 is yes.
    mutating func connackReceived(reason: Int32, sessionPresent: Bool) -> [Action] {
        guard phase == .connecting else { return [] }
        guard reason == 0 else { return [.refused(MQTTError.connectionRefused(reason: reason))] }
        phase = .opening(sessionPresent: sessionPresent)
        return [.resubscribe]
    }

    /// libmosquitto's handling of the CONNACK is over: at the first callback or turn of the loop after it.
    mutating func connackHandled(at now: ContinuousClock.Instant) -> [Action] {
        guard case .opening(let sessionPresent) = phase else { return [] }
        phase = .connected
        delay = policy.reconnectDelay
        return [.open(sessionPresent: sessionPresent)]
    }

    /// The connection ended (libmosquitto said so, or the socket is gone): `error` is why, `nil` for a DISCONNECT
    /// the client asked for.
    mutating func connectionEnded(_ error: MQTTError?, at now: ContinuousClock.Instant) -> [Action] {
        var actions: [Action] = []
        switch phase {
        case .connected:
            actions.append(.closedConnection(stopRequested || draining ? nil : error))
        case .disconnecting(_, let wasOpen):
            if wasOpen { actions.append(.closedConnection(nil)) }
        case .connecting, .opening:
            // It never opened: nobody heard of it.
            break
        case .idle, .backingOff, .closed:
            return []
        }
        if stopRequested || draining {
            phase = .closed
            return actions + [.finish]
        }
        return actions + [.retry(at: backOff(at: now))]
    }

    /// The client drains what it published before it stops: the connection stays until ``stop(at:)``, but one that
    /// ends meanwhile (the broker going away first) ends the loop instead of reconnecting.
    mutating func drain() -> [Action] {
        guard !draining, !stopRequested else { return [] }
        draining = true
        switch phase {
        case .idle, .backingOff:
            phase = .closed
            return [.finish]
        case .connecting, .opening, .connected, .disconnecting, .closed:
            return []
        }
    }

    /// The time passed: an attempt may be due, or a DISCONNECT's time be up.
    mutating func tick(at now: ContinuousClock.Instant) -> [Action] {
        switch phase {
        case .backingOff(let until) where now >= until:
            return attempt()
        case .disconnecting(let deadline, let wasOpen) where now >= deadline:
            phase = .closed
            return (wasOpen ? [.closedConnection(nil)] : []) + [.dropConnection, .finish]
        default:
            return []
        }
    }

    /// Stop reconnecting and end: a connection is closed with a DISCONNECT, a wait is cut short.
    mutating func stop(at now: ContinuousClock.Instant) -> [Action] {
        guard !stopRequested else { return [] }
        stopRequested = true
        switch phase {
        case .idle:
            return []
        case .connecting, .opening, .connected:
            return disconnect(at: now)
        case .backingOff:
            phase = .closed
            return [.finish]
        case .disconnecting, .closed:
            return []
        }
    }

    // MARK: Helpers

    private mutating func attempt() -> [Action] {
        phase = .connecting
        defer { attempted = true }
        return [.connect(first: !attempted)]
    }

    /// Waits the current delay, and doubles the next one (up to the maximum).
    private mutating func backOff(at now: ContinuousClock.Instant) -> ContinuousClock.Instant {
        let until = now + delay
        phase = .backingOff(until: until)
        delay = min(delay * 2, policy.maximumReconnectDelay)
        return until
    }

    private mutating func disconnect(at now: ContinuousClock.Instant) -> [Action] {
        phase = .disconnecting(deadline: now + policy.disconnectTimeout, wasOpen: phase == .connected)
        return [.sendDisconnect]
    }
}
