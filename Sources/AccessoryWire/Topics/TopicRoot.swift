/// The first levels of every topic of the contract, `audio` by default: `audio/hubs/{hub}/…`.
///
/// One or more levels (`site-1/audio` is fine), none empty, no wildcards (`+`, `#`), no NUL, not starting with `$`
/// (reserved by brokers), at most 128 bytes.
public struct TopicRoot: Hashable, Sendable, CustomStringConvertible {
    public let rawValue: String

    /// `audio`.
    public static let `default` = TopicRoot("audio")!

    /// The grammar in words, for error messages.
    public static let grammar =
        "one or more '/'-separated levels, none empty, without '+', '#' or NUL, not starting with '$', at most 128 bytes"

    /// Creates a root, or `nil` when `rawValue` breaks ``grammar``.
    public init?(_ rawValue: String) {
        let bytes = rawValue.utf8
        guard !bytes.isEmpty, bytes.count <= 128, bytes.first != UInt8(ascii: "$"),
            !bytes.contains(where: { $0 == UInt8(ascii: "+") || $0 == UInt8(ascii: "#") || $0 == 0 }),
            !rawValue.split(separator: "/", omittingEmptySubsequences: false).contains(where: \.isEmpty)
        else { return nil }
        self.rawValue = rawValue
    }

    public var description: String { rawValue }
}
