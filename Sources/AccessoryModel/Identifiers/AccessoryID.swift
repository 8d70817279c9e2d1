/// The id of an audio accessory, unique across all hubs: 1–64 of `A–Z`, `a–z`, `0–9`, `_`, `-`.
public struct AccessoryID: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// The id as it appears in topics and payloads.
    public let rawValue: String

    /// Creates an id, or `nil` when `rawValue` breaks ``IdentifierGrammar``.
    public init?(_ rawValue: some StringProtocol) {
        guard IdentifierGrammar.accepts(rawValue) else { return nil }
        self.rawValue = String(rawValue)
    }

    /// Creates an id from its UTF-8 bytes, or `nil` when they break ``IdentifierGrammar``.
    @inlinable
    public init?(utf8: some Collection<UInt8>) {
        guard IdentifierGrammar.accepts(utf8: utf8) else { return nil }
        self.rawValue = String(decoding: utf8, as: UTF8.self)
    }

    public var description: String { rawValue }

    public static func < (lhs: Self, rhs: Self) -> Bool { lhs.rawValue < rhs.rawValue }
}
