import AccessoryModel
import Foundation
import SwiftProtobuf

/// Writes fields in protobuf's binary wire format, skipping proto3 defaults as swift-protobuf does: what
/// ``OutboundEncoder`` lays its messages out with. Callers write fields in field-number order, which is what makes
/// the bytes canonical (swift-protobuf's).
struct ProtobufWriter {
    private(set) var bytes: [UInt8] = []

    /// A writer whose array holds `capacity` bytes before it grows.
    init(capacity: Int) {
        bytes.reserveCapacity(capacity)
    }

    private enum WireType: UInt8 {
        case varint = 0
        case lengthDelimited = 2
    }

    /// A field's key: one byte for fields 1 to 15, two from 16.
    private mutating func key(_ field: UInt8, _ wireType: WireType) {
        varint(UInt64(field) << 3 | UInt64(wireType.rawValue))
    }

    private mutating func varint(_ value: UInt64) {
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

    /// An enum field: a negative value takes ten bytes, as an int32 does.
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
        key(field, .lengthDelimited)
        varint(UInt64(value.utf8.count))
        bytes.append(contentsOf: value.utf8)
    }

    /// A singular bytes field: skipped when empty.
    mutating func bytes(_ field: UInt8, _ value: Data) {
        guard !value.isEmpty else { return }
        message(field, encoded: value)
    }

    /// A Bluetooth address as a bytes field of its 6 bytes; skipped when there is none.
    mutating func address(_ field: UInt8, _ address: BluetoothAddress?) {
        guard let address else { return }
        key(field, .lengthDelimited)
        bytes.append(6)
        for shift in stride(from: 40, through: 0, by: -8) {
            bytes.append(UInt8(truncatingIfNeeded: address.rawValue >> UInt64(shift)))
        }
    }

    /// A message field, present also when empty, whose body `body` writes.
    mutating func message(_ field: UInt8, _ body: (inout ProtobufWriter) -> Void) {
        key(field, .lengthDelimited)
        // One byte for the length, which is nearly always below 128; a longer one moves the body along.
        let lengthAt = bytes.count
        bytes.append(0)
        body(&self)
        let length = bytes.count - lengthAt - 1
        guard length >= 0x80 else {
            bytes[lengthAt] = UInt8(length)
            return
        }
        var prefix = ProtobufWriter(capacity: 10)
        prefix.varint(UInt64(length))
        bytes.replaceSubrange(lengthAt..<lengthAt + 1, with: prefix.bytes)
    }

    /// A message (or bytes) field whose bytes were encoded elsewhere, as they are.
    mutating func message(_ field: UInt8, encoded: some Collection<UInt8>) {
        key(field, .lengthDelimited)
        varint(UInt64(encoded.count))
        bytes.append(contentsOf: encoded)
    }

    /// Fields encoded elsewhere, as they are.
    mutating func raw(_ encoded: [UInt8]) {
        bytes.append(contentsOf: encoded)
    }
}
