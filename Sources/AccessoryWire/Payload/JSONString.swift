/// JSON's string rule, written once for everything that writes JSON by hand: home automation's views, events and
/// discovery configs (`JSONObjectWriter`) and the bridge's JSON log lines. Inlinable: the views are written on every
/// report.
public enum JSONString {
    /// Appends `value` as a JSON string: `"` and `\` escaped, control characters as `\u00XX` (RFC 8259 §7); the rest
    /// as UTF-8.
    @inlinable
    public static func append(_ value: String, to bytes: inout [UInt8]) {
        bytes.append(UInt8(ascii: "\""))
        for byte in value.utf8 {
            switch byte {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"):
                bytes.append(UInt8(ascii: "\\"))
                bytes.append(byte)
            case 0..<0x20:
                bytes.append(contentsOf: "\\u00".utf8)
                bytes.append(hexDigit(byte >> 4))
                bytes.append(hexDigit(byte & 0xF))
            default:
                bytes.append(byte)
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }

    @inlinable
    static func hexDigit(_ nibble: UInt8) -> UInt8 {
        nibble < 10 ? UInt8(ascii: "0") + nibble : UInt8(ascii: "a") + nibble - 10
    }
}
