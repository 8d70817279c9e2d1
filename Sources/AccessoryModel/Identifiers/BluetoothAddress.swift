#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A 6-byte Bluetooth device address: how an accessory names the audio sources it is connected to
/// (`primary/secondaryAudioSourceDeviceIdentifier`) and how a playing device is named in topics.
///
/// Three spellings: the 6 bytes of the wire (`0x12 0x34 0x56 0x78 0x9A 0xBC`, most significant first), the topic id
/// (12 lowercase hex digits, `123456789abc`) and the human form (`12:34:56:78:9A:BC`).
public struct BluetoothAddress: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// The 48 address bits, most significant byte first.
    public let rawValue: UInt64

    /// The number of bytes in an address.
    public static let byteCount = 6

    /// Creates an address from its 48 bits; `nil` when higher bits are set.
    public init?(rawValue: UInt64) {
        guard rawValue >> 48 == 0 else { return nil }
        self.rawValue = rawValue
    }

    /// Creates an address from exactly 6 bytes, most significant first; `nil` for any other length.
    public init?(bytes: some Collection<UInt8>) {
        guard bytes.count == Self.byteCount else { return nil }
        self.rawValue = bytes.reduce(0) { $0 << 8 | UInt64($1) }
    }

    /// Creates an address from exactly 6 bytes of `Data` (AudioAccessoryKit's identifiers); `nil` for any other length.
    public init?(bytes data: Data) {
        guard data.count == Self.byteCount else { return nil }
        self.rawValue = data.withUnsafeBytes { raw in raw.reduce(0) { $0 << 8 | UInt64($1) } }
    }

    /// Creates an address from its topic id: exactly 12 lowercase hex digits.
    public init?(topicID: some StringProtocol) {
        self.init(topicIDUTF8: topicID.utf8)
    }

    /// Creates an address from the UTF-8 bytes of its topic id: exactly 12 lowercase hex digits.
    @inlinable
    public init?(topicIDUTF8 utf8: some Collection<UInt8>) {
        var value: UInt64 = 0
        var count = 0
        for byte in utf8 {
            count += 1
            guard count <= 12 else { return nil }
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): value = value << 4 | UInt64(byte - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): value = value << 4 | UInt64(byte - UInt8(ascii: "a") + 10)
            default: return nil
            }
        }
        guard count == 12 else { return nil }
        self.rawValue = value
    }

    /// Creates an address from the human form, `12:34:56:78:9A:BC` (either case; `-` also separates), or from the
    /// 12 hex digits alone.
    public init?(_ text: some StringProtocol) {
        let digits = text.utf8.filter { $0 != UInt8(ascii: ":") && $0 != UInt8(ascii: "-") }
        let separators = text.utf8.count - digits.count
        guard separators == 0 || separators == 5 else { return nil }
        if separators == 5 {
            // Separators must sit between byte pairs: "12:34:…", never "1:234:…".
            let bytes = Array(text.utf8)
            guard bytes.count == 17, stride(from: 2, to: 17, by: 3).allSatisfy({ bytes[$0] == UInt8(ascii: ":") || bytes[$0] == UInt8(ascii: "-") })
            else { return nil }
        }
        self.init(topicID: String(decoding: digits, as: UTF8.self).lowercased())
    }

    /// The 6 bytes, most significant first.
    public var bytes: [UInt8] {
        (0..<Self.byteCount).map { UInt8(truncatingIfNeeded: rawValue >> (8 * (5 - $0))) }
    }

    /// The 6 bytes as `Data`, the type of AudioAccessoryKit's identifiers.
    public var data: Data {
        withUnsafeBytes(of: rawValue.bigEndian) { Data(bytes: $0.baseAddress! + 2, count: Self.byteCount) }
    }

    /// The id of this address in topics: 12 lowercase hex digits.
    public var topicID: String { hexDigits(Self.lowercaseDigits, separator: nil) }

    /// `12:34:56:78:9A:BC`.
    public var description: String { hexDigits(Self.uppercaseDigits, separator: UInt8(ascii: ":")) }

    private static let lowercaseDigits = Array("0123456789abcdef".utf8)
    private static let uppercaseDigits = Array("0123456789ABCDEF".utf8)

    /// The 12 hex digits of the address in `digits`, most significant first, each byte's two apart from the next by
    /// `separator`. Written in place: this runs for every topic and every view of an address.
    private func hexDigits(_ digits: [UInt8], separator: UInt8?) -> String {
        let count = separator == nil ? 12 : 17
        return String(unsafeUninitializedCapacity: count) { buffer in
            var at = 0
            for index in 0..<12 {
                if let separator, index > 0, index % 2 == 0 {
                    buffer[at] = separator
                    at += 1
                }
                buffer[at] = digits[Int((rawValue >> (4 * (11 - index))) & 0xF)]
                at += 1
            }
            return at
        }
    }

    public static func < (lhs: Self, rhs: Self) -> Bool { lhs.rawValue < rhs.rawValue }
}
