/// Why a payload could not be read.
public struct WireError: Error, Hashable, Sendable, CustomStringConvertible {
    public enum Kind: String, Hashable, Sendable, CaseIterable {
        /// The MQTT 5 content type is neither JSON nor protobuf.
        case unsupportedContentType
        /// Larger than the configured limit.
        case tooLarge
        /// Not a valid binary protobuf encoding of the message (truncated, malformed, invalid UTF-8, ...).
        case malformedProtobuf
        /// Not valid JSON, or not the canonical JSON mapping of the message.
        case malformedJSON
        /// Decodes, but holds a value this version refuses (an enum value it does not know, a malformed id).
        case invalidValue
    }

    public var kind: Kind
    /// What is wrong, for a person.
    public var reason: String

    public init(_ kind: Kind, _ reason: String) {
        self.kind = kind
        self.reason = reason
    }

    public var description: String { reason }
}
