import DequeModule
import OrderedCollections

/// A subscription the client remembers and sends again after every connect.
struct Subscription: Hashable, Sendable {
    var filter: String
    var qos: QoS
    var noLocal: Bool
}

/// What the API, the network thread and libmosquitto's callbacks share, behind ``ClientCore/state``.
struct ClientState {
    enum Lifecycle {
        /// Created; ``MQTTClient/start()`` not called yet.
        case idle
        /// The network thread connects and reconnects.
        case running
        /// ``MQTTClient/disconnect()`` began: it waits for what was published to be acknowledged, then stops; a
        /// connection that ends meanwhile is not reopened.
        case draining
        /// ``MQTTClient/disconnect()`` was called: the network thread sends DISCONNECT and ends.
        case stopped
        /// ``MQTTClient/close()`` was called.
        case closed
    }

    var lifecycle: Lifecycle = .idle
    /// From just after a CONNACK success was handled (see ``ClientCore``'s `finishConnecting()`) to the end of that
    /// connection.
    var isConnected = false
    /// Whether any CONNACK success happened since ``MQTTClient/start()``.
    var hasConnected = false
    /// Why the last attempt to connect failed (unreachable, refused, TLS), until the next connection.
    var lastFailure: MQTTError?

    /// QoS > 0 messages waiting for room in the send window (all of them while disconnected), oldest first: the
    /// client hands libmosquitto at most a window's worth at a time, since libmosquitto walks its whole list of
    /// outgoing messages on every acknowledgement.
    var pending = Deque<MQTTMessage>()
    /// The most messages `pending` held since it was last empty: a deque never gives its storage back, so once it
    /// empties after holding many (an outage, an overflow), it is replaced.
    var pendingPeak = 0
    /// A message was refused because `pending` was full: an ``MQTTEvent/queueDrained`` is due once it is empty.
    var refusedSinceDrained = false

    /// By filter, in the order they were first made (a cluster's slot has one per playing device it reads).
    var subscriptions: OrderedDictionary<String, Subscription> = [:]
    /// SUBSCRIBE message ids waiting for their SUBACK → the filters they carried.
    var pendingSubscribes: [Int32: [String]] = [:]
    /// SUBACK reason codes that arrived before ``MQTTClient/subscribe(_:qos:noLocal:)`` recorded the message id
    /// libmosquitto gave it (the network thread can be that fast).
    var earlySubacks: [Int32: [Int32]] = [:]

    /// Message ids of QoS > 0 messages libmosquitto took and the broker has not acknowledged yet.
    var unacknowledged: Set<Int32> = []
    /// Tasks waiting until `unacknowledged` is empty (or the connection is gone).
    var drainWaiters = Waiters<Void>()

    var connectionWaiters = Waiters<Result<Void, MQTTError>>()
    var loopExitWaiters = Waiters<Void>()

    /// The network loop let go of the session (or never ran it).
    var loopExited = true
    /// ``MQTTClient/close()`` ran on the network thread, or closed a publishing session its receiving session's loop
    /// still runs: the loop releases libmosquitto when it lets go of the session.
    var releaseWhenLoopExits = false

    var stopRequested: Bool { lifecycle != .running && lifecycle != .draining }
}
