/// How an ``MQTTClient`` connects. Every field has a sensible default but ``clientID``.
public struct MQTTConfiguration: Sendable {
    /// TLS settings: the CA that signs the broker's certificate and, for client-certificate authentication, the
    /// client's certificate and key (PEM files).
    public struct TLS: Hashable, Sendable {
        public var caFile: String
        public var certificateFile: String?
        public var keyFile: String?

        public init(caFile: String, certificateFile: String? = nil, keyFile: String? = nil) {
            self.caFile = caFile
            self.certificateFile = certificateFile
            self.keyFile = keyFile
        }
    }

    public var host: String = "127.0.0.1"
    public var port: Int = 1883
    /// The MQTT client identifier; stable across restarts for a persistent session.
    public var clientID: String
    /// MQTT 5 clean start: `false` resumes the session the broker kept for ``clientID``.
    public var cleanStart: Bool = true
    /// MQTT 5 session expiry interval: how long the broker keeps the session after a disconnect (whole seconds;
    /// `nil`: until the connection closes).
    public var sessionExpiry: Duration?
    /// MQTT keep-alive (5 s to 65,535 s).
    public var keepAlive: Duration = .seconds(30)
    /// How long a session may go without a turn of its network thread when nothing else calls for one (a publishing
    /// session's turns are its receiving session's, the shorter of the two): a quarter of ``keepAlive``.
    /// libmosquitto sends a PINGREQ, and notices a PINGRESP that never came, only in a turn (`mosquitto_loop_misc`):
    /// the ping leaves at most a quarter keep-alive late, well within the keep-alive and a half after which the broker
    /// drops a silent client, and a connection that died silently is noticed at most that much later. Everything
    /// else that needs a turn brings its own: a packet, a connection the broker closed, a state machine's or the
    /// handler's deadline, acknowledgements due, a paused session's next read, another thread's wake-up
    /// (docs/performance-history.md, "Idle sessions: a turn every quarter keep-alive"). Not public: tests lengthen
    /// it, to show that what they wait for comes of the events themselves and not of an idle turn.
    var idleTurn: Duration {
        get { idleTurnSet ?? keepAlive / 4 }
        set { idleTurnSet = newValue }
    }
    private var idleTurnSet: Duration?
    /// How long acknowledgements may wait for a turn of the network thread rather than have one of their own: those
    /// the broker sends a publishing session, read in its receiving session's next turn, and those a receiving session
    /// with a publishing session sends the broker (docs/performance-history.md, "Acknowledgements in the next turn").
    /// Not public: tests lengthen it, to see what waits.
    var acknowledgementDelay: Duration = .milliseconds(5)
    public var username: String?
    public var password: String?
    public var tls: TLS?
    /// Published by the broker when the connection is lost without a DISCONNECT.
    public var will: MQTTMessage?
    /// First delay before reconnecting; it doubles after each failed attempt up to ``maximumReconnectDelay``, and
    /// starts over after a successful connection. Fractions of a second are honoured.
    public var reconnectDelay: Duration = .seconds(1)
    public var maximumReconnectDelay: Duration = .seconds(30)
    /// Disables Nagle's algorithm, so small messages leave at once.
    public var tcpNoDelay: Bool = true
    /// The send window: the most QoS > 0 messages in flight towards the broker at once, 1...65535 (also MQTT 5's
    /// "send maximum"). The client holds the rest, in order, and hands them to libmosquitto as acknowledgements come
    /// back: libmosquitto walks its whole list of outgoing messages on every acknowledgement, so a wide window costs
    /// time per message (docs/performance-history.md, "The MQTT client's send window").
    public var maximumInflightMessages: Int = 100
    /// The most QoS > 0 messages the broker may have in flight towards this client at once: the CONNECT "receive
    /// maximum", 1...65535 (libmosquitto's own default is 20).
    public var maximumIncomingInflightMessages: Int = 100
    /// The most QoS > 0 messages the client holds beyond its send window (while disconnected: all it is given);
    /// beyond it, ``MQTTClient/publish(_:)`` throws ``MQTTError/Kind/queueFull``, so that memory stays bounded during
    /// a long outage.
    public var maximumPendingMessages: Int = 100_000
    /// Asked on the network thread before every attempt to connect (the first and each reconnection): `nil` lets it
    /// go; a reason holds it back, as a failed attempt (``MQTTError/Kind/notPermitted``, with that reason) tried again
    /// after the usual delay. A cluster's slot connects only while its owner's etcd lease is fresh (self-fencing:
    /// docs/scale-out.md). Its publishing session asks the same.
    public var connectionGate: (@Sendable () -> String?)?

    public init(clientID: String) {
        self.clientID = clientID
    }

    /// The configuration of a session that publishes for this one (see
    /// ``MQTTClient/init(configuration:publishingSession:loops:logger:)``): the same broker and settings, under the client
    /// identifier `<clientID>-publishing`, with a clean start and no session kept: libmosquitto sends again what was in
    /// flight when a connection ended, and the client's own queue keeps the rest.
    public var publishingSession: MQTTConfiguration {
        companion(clientID: clientID + "-publishing", will: will)
    }

    /// A connection beside this one's (a session that publishes for it, a read of retained messages, a status of its
    /// own): the same broker, credentials and settings, under `clientID`, with a clean start and no session kept
    /// after it, and `will` (none by default). The one rule for such connections.
    public func companion(clientID: String, will: MQTTMessage? = nil) -> MQTTConfiguration {
        var companion = self
        companion.clientID = clientID
        companion.cleanStart = true
        companion.sessionExpiry = nil
        companion.will = will
        return companion
    }
}
