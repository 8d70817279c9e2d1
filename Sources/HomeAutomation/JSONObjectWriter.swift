import AccessoryWire

/// Writes one flat JSON object, field by field, straight into bytes: the views and events published on every state
/// change and command (Foundation's `JSONSerialization` cost several times the rest of handling a message). The caller
/// writes keys in sorted order, so the output is stable. ``document(_:)`` writes the nested discovery configs.
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

    private mutating func string(_ value: String) {
        JSONString.append(value, to: &bytes)
    }

    /// Compact JSON of a document made of `[String: Any]` (keys sorted, so the same document always gives the same
    /// bytes), arrays, strings, integers and booleans: Home Assistant's discovery configs. (Foundation's
    /// `JSONSerialization` with sorted keys took about a millisecond per config here, bridging every dictionary and
    /// comparing keys through ICU: a restart with a million accessories compares a million configs.) Any other value
    /// is written as `null`.
    static func document(_ value: Any) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(4096)
        append(value, to: &bytes)
        return bytes
    }

    private static func append(_ value: Any, to bytes: inout [UInt8]) {
        switch value {
        case let string as String:
            JSONString.append(string, to: &bytes)
        case let flag as Bool:
            bytes.append(contentsOf: (flag ? "true" : "false").utf8)
        case let number as Int:
            bytes.append(contentsOf: String(number).utf8)
        case let object as [String: Any]:
            bytes.append(UInt8(ascii: "{"))
            for (index, key) in object.keys.sorted().enumerated() {
                if index > 0 { bytes.append(UInt8(ascii: ",")) }
                JSONString.append(key, to: &bytes)
                bytes.append(UInt8(ascii: ":"))
                append(object[key]!, to: &bytes)
            }
            bytes.append(UInt8(ascii: "}"))
        case let array as [Any]:
            bytes.append(UInt8(ascii: "["))
            for (index, element) in array.enumerated() {
                if index > 0 { bytes.append(UInt8(ascii: ",")) }
                append(element, to: &bytes)
            }
            bytes.append(UInt8(ascii: "]"))
        default:
            bytes.append(contentsOf: "null".utf8)
        }
    }
}
