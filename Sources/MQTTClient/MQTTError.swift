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
}
