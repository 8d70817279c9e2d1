/// The grammar shared by hub and accessory ids: 1–64 of `A–Z`, `a–z`, `0–9`, `_`, `-`.
///
/// Ids appear as MQTT topic levels, so this grammar keeps them free of `/`, `+`, `#` and anything a broker ACL
/// pattern could misread.
public enum IdentifierGrammar {
    /// The longest id, in characters.
    public static let maximumLength = 64

    /// The grammar in words, for error messages.
    public static let description = "1–64 characters of A–Z, a–z, 0–9, '_' or '-'"

    /// Whether `text` is a valid id.
    @inlinable
    public static func accepts(_ text: some StringProtocol) -> Bool {
        accepts(utf8: text.utf8)
    }

    /// Whether the UTF-8 bytes `utf8` are a valid id.
    @inlinable
    public static func accepts(utf8: some Collection<UInt8>) -> Bool {
        var count = 0
        for byte in utf8 {
            count += 1
            guard count <= maximumLength, isAllowed(byte) else { return false }
        }
        return count > 0
    }

    /// Whether `byte` may appear in an id.
    @inlinable
    public static func isAllowed(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "_"), UInt8(ascii: "-"):
            true
        default:
            false
        }
    }
}
