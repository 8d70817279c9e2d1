/// An id made of ``IdentifierGrammar``: what hub and accessory ids share. Each kind of id is its own type, so that a
/// hub id is never passed where an accessory id belongs.
public protocol Identifier: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// The id as it appears in topics and payloads.
    var rawValue: String { get }

    /// Wraps `rawValue`, which the caller has checked against ``IdentifierGrammar``. Use ``init(_:)`` or
    /// ``init(utf8:)``, which check it.
    init(grammarChecked rawValue: String)
}

extension Identifier {
    /// Creates an id, or `nil` when `rawValue` breaks ``IdentifierGrammar``.
    @inlinable
    public init?(_ rawValue: some StringProtocol) {
        guard IdentifierGrammar.accepts(rawValue) else { return nil }
        self.init(grammarChecked: String(rawValue))
    }

    /// Creates an id from its UTF-8 bytes, or `nil` when they break ``IdentifierGrammar``.
    @inlinable
    public init?(utf8: some Collection<UInt8>) {
        guard IdentifierGrammar.accepts(utf8: utf8) else { return nil }
        self.init(grammarChecked: String(decoding: utf8, as: UTF8.self))
    }

    public var description: String { rawValue }

    public static func < (lhs: Self, rhs: Self) -> Bool { lhs.rawValue < rhs.rawValue }
}
