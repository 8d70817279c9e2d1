/// Writes one flat JSON object, field by field, straight into bytes: the views and events published on every state
/// change and command (Foundation's `JSONSerialization` cost several times the rest of handling a message). The caller
/// writes keys in sorted order, so the output is stable.
struct JSONObjectWriter {
    private(set) var bytes: [UInt8] = [UInt8(ascii: "{")]

    init(capacity: Int = 320) {
        bytes.reserveCapacity(capacity)
    }

    mutating func field(_ key: StaticString, _ value: String) {
        name(key)
        string(value)
    }

    mutating func field(_ key: StaticString, _ value: some BinaryInteger) {
        name(key)
        bytes.append(contentsOf: String(value).utf8)
    }

    mutating func field(_ key: StaticString, _ value: Bool) {
        name(key)
        bytes.append(contentsOf: (value ? "true" : "false").utf8)
    }

    mutating func field(_ key: StaticString, _ values: [String]) {
        name(key)
        bytes.append(UInt8(ascii: "["))
        for (index, value) in values.enumerated() {
            if index > 0 { bytes.append(UInt8(ascii: ",")) }
            string(value)
        }
        bytes.append(UInt8(ascii: "]"))
    }

    /// The object's bytes, closed.
    consuming func finish() -> [UInt8] {
        bytes.append(UInt8(ascii: "}"))
        return bytes
    }

    private mutating func name(_ key: StaticString) {
        if bytes.count > 1 { bytes.append(UInt8(ascii: ",")) }
        bytes.append(UInt8(ascii: "\""))
        key.withUTF8Buffer { bytes.append(contentsOf: $0) }
        bytes.append(contentsOf: "\":".utf8)
    }

    /// A JSON string: `"` and `\` escaped, control characters as `\u00XX` (RFC 8259 §7); the rest as UTF-8.
    private mutating func string(_ value: String) {
        bytes.append(UInt8(ascii: "\""))
        for byte in value.utf8 {
            switch byte {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"):
                bytes.append(UInt8(ascii: "\\"))
                bytes.append(byte)
            case 0..<0x20:
                let hex = Array("0123456789abcdef".utf8)
                bytes.append(contentsOf: "\\u00".utf8)
                bytes.append(hex[Int(byte >> 4)])
                bytes.append(hex[Int(byte & 0xF)])
            default:
                bytes.append(byte)
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }
}
