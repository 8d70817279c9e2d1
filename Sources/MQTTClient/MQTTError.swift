/// A failure of libmosquitto or of the broker, with its code and text.
public struct MQTTError: Error, Hashable, Sendable, CustomStringConvertible {
    public enum Kind: Hashable, Sendable {
        /// A libmosquitto call returned `MOSQ_ERR_*` (``code``); the text is `mosquitto_strerror`'s.
        case library
        /// `MOSQ_ERR_ERRNO`: ``code`` is the `errno`; the text is `strerror`'s.
        case system
        /// The broker refused the connection: ``code`` is the CONNACK reason code (`mosquitto_reason_string`).
        case connectionRefused
        /// The broker or the network ended the connection: ``code`` is the DISCONNECT reason code or `MOSQ_ERR_*`.
        case disconnected
        /// The broker refused a subscription: ``code`` is the SUBACK reason code.
        case subscriptionRefused
        /// A bad argument found before calling libmosquitto (``code`` is `MOSQ_ERR_INVAL`).
        case invalidArgument
        /// ``MQTTConfiguration/maximumPendingMessages`` messages already wait, beyond the send window or for the next
        /// connection (``code`` is `MOSQ_ERR_NO_CONN`).
        case queueFull
        /// ``MQTTClient/waitUntilConnected(timeout:)`` gave up: no connection within the time given (``code`` is
        /// `MOSQ_ERR_NO_CONN`); the message names why the last attempt failed.
        case notConnected
        /// ``MQTTConfiguration/connectionGate`` held an attempt to connect back (``code`` is `MOSQ_ERR_NO_CONN`); the
        /// message is the gate's reason.
        case notPermitted
    }

    public var kind: Kind
    public var code: Int32
    public var message: String

    public init(kind: Kind, code: Int32, message: String) {
        self.kind = kind
        self.code = code
        self.message = message
    }

    public var description: String { "\(message) (\(kind), code \(code))" }

    /// Whether trying again with the same configuration cannot mend it: the broker refused the client's credentials
    /// or authorization (CONNACK 0x84 unsupported protocol version, 0x85 client identifier not valid, 0x86 bad user
    /// name or password, 0x87 not authorized, 0x8C bad authentication method), or TLS failed (a certificate the CA
    /// does not sign, a file that holds no certificate or key). A refused TCP connection, a lost one or a name that
    /// does not resolve may mend by themselves: not permanent.
    public var isPermanent: Bool {
        switch kind {
        case .connectionRefused: [0x84, 0x85, 0x86, 0x87, 0x8C].contains(code)
        case .library: code == MQTTError.tlsFailure || code == MQTTError.authenticationFailure
        default: false
        }
    }
}
