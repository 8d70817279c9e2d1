import Foundation
import SwiftProtobuf

/// Appends fields in protobuf's binary wire format to a byte array, skipping proto3 defaults as swift-protobuf does:
/// what ``OutboundEncoder`` lays its messages out with. Callers write fields in field-number order, which is what makes
/// the bytes canonical.
struct ProtobufWriter {
    private(set) var bytes: [UInt8] = []

    init(capacity: Int) {
        bytes.reserveCapacity(capacity)
    }

    private enum WireType: UInt8 {
        case varint = 0
        case lengthDelimited = 2
    }

    private mutating func key(_ field: UInt8, _ wireType: WireType) {
        // Every field number here is below 16: its key is one byte.
        bytes.append(field << 3 | wireType.rawValue)
    }

    mutating func varint(_ value: UInt64) {
        var value = value
        while value >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: value) | 0x80)
            value >>= 7
        }
        bytes.append(UInt8(value))
    }

    mutating func uint64(_ field: UInt8, _ value: UInt64) {
        guard value != 0 else { return }
        key(field, .varint)
        varint(value)
    }

    mutating func int64(_ field: UInt8, _ value: Int64) {
        uint64(field, UInt64(bitPattern: value))
    }

    mutating func bool(_ field: UInt8, _ value: Bool) {
        guard value else { return }
        key(field, .varint)
        bytes.append(1)
    }

    /// An enum field: negative values take ten bytes, as int32 does.
    mutating func enumeration(_ field: UInt8, _ value: some SwiftProtobuf.Enum) {
        uint64(field, UInt64(bitPattern: Int64(value.rawValue)))
    }

    /// A singular string: skipped when empty.
    mutating func string(_ field: UInt8, _ value: String) {
        guard !value.isEmpty else { return }
        element(field, value)
    }

    /// One element of a repeated string: written also when empty.
    mutating func element(_ field: UInt8, _ value: String) {
        var value = value
        value.withUTF8 { lengthDelimited(field, UnsafeRawBufferPointer($0)) }
    }

    /// A singular bytes field: skipped when empty.
    mutating func bytes(_ field: UInt8, _ value: Data) {
        guard !value.isEmpty else { return }
        value.withUnsafeBytes { lengthDelimited(field, $0) }
    }

    /// A 6-byte address as a bytes field.
    mutating func address(_ field: UInt8, _ value: UInt64) {
        key(field, .lengthDelimited)
        bytes.append(6)
        for shift in stride(from: 40, through: 0, by: -8) {
            bytes.append(UInt8(truncatingIfNeeded: value >> UInt64(shift)))
        }
    }

    private mutating func lengthDelimited(_ field: UInt8, _ value: UnsafeRawBufferPointer) {
        key(field, .lengthDelimited)
        varint(UInt64(value.count))
        bytes.append(contentsOf: value)
    }

    /// A message field that is always present (also when empty), its body written by `body`.
    mutating func message(_ field: UInt8, _ body: (inout ProtobufWriter) -> Void) {
        key(field, .lengthDelimited)
        let lengthAt = bytes.count
        bytes.append(0)
        body(&self)
        let length = bytes.count - lengthAt - 1
        if length < 0x80 {
            bytes[lengthAt] = UInt8(length)
        } else {
            var prefix = ProtobufWriter(capacity: 10)
            prefix.varint(UInt64(length))
            bytes.replaceSubrange(lengthAt...lengthAt, with: prefix.bytes)
        }
    }

    /// Bytes encoded elsewhere, as they are.
    mutating func raw(_ encoded: [UInt8]) {
        bytes.append(contentsOf: encoded)
    }

    /// A message field whose bytes were encoded elsewhere.
    mutating func message(_ field: UInt8, encoded: [UInt8]) {
        encoded.withUnsafeBytes { lengthDelimited(field, $0) }
    }
}
