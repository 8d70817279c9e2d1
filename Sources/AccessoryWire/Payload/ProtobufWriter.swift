import Foundation
import SwiftProtobuf

/// Writes fields in protobuf's binary wire format, skipping proto3 defaults as swift-protobuf does: what
/// ``OutboundEncoder`` lays its messages out with. Callers write fields in field-number order, which is what makes
/// the bytes canonical.
///
/// The bytes go straight into the array's storage, sized once from a bound the caller gives (see
/// ``write(bound:_:)``), without a capacity or uniqueness check per byte.
struct ProtobufWriter {
    private let start: UnsafeMutablePointer<UInt8>
    private let capacity: Int
    private var count = 0

    /// The most bytes a field takes besides its payload: its key (every field number here is below 16: one byte) and
    /// a length or value varint (at most ten bytes).
    static let fieldOverhead = 11

    private init(start: UnsafeMutablePointer<UInt8>, capacity: Int) {
        self.start = start
        self.capacity = capacity
    }

    /// The bytes `body` writes. `bound` must be at least what it writes: ``fieldOverhead`` per field written (a
    /// message field counts once for itself, and its fields count too) plus the payloads of strings, bytes and raw
    /// fields. A bound too small is a programming error, caught before any byte is written past it.
    @inline(__always)  // Inlined with its body, the caller's values are read in place rather than captured.
    static func write(bound: Int, _ body: (inout ProtobufWriter) -> Void) -> [UInt8] {
        // Written on the stack, then copied once into an array of the exact size.
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: bound) { buffer in
            var writer = ProtobufWriter(start: buffer.baseAddress!, capacity: bound)
            body(&writer)
            return Array(UnsafeBufferPointer(rebasing: buffer[..<writer.count]))
        }
    }

    private enum WireType: UInt8 {
        case varint = 0
        case lengthDelimited = 2
    }

    private mutating func byte(_ byte: UInt8) {
        precondition(count < capacity, "ProtobufWriter: the bound given to write(bound:_:) is too small")
        start[count] = byte
        count += 1
    }

    private mutating func copy(_ bytes: UnsafeRawBufferPointer) {
        precondition(bytes.count <= capacity - count, "ProtobufWriter: the bound given to write(bound:_:) is too small")
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return }
        (start + count).update(from: base.assumingMemoryBound(to: UInt8.self), count: bytes.count)
        count += bytes.count
    }

    private mutating func key(_ field: UInt8, _ wireType: WireType) {
        byte(field << 3 | wireType.rawValue)
    }

    @inline(__always)
    mutating func varint(_ value: UInt64) {
        // Keys, lengths and enums nearly always fit in one byte.
        guard value >= 0x80 else { return byte(UInt8(value)) }
        multiByteVarint(value)
    }

    private mutating func multiByteVarint(_ value: UInt64) {
        var value = value
        while value >= 0x80 {
            byte(UInt8(truncatingIfNeeded: value) | 0x80)
            value >>= 7
        }
        byte(UInt8(value))
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
        byte(1)
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
        byte(6)
        byte(UInt8(truncatingIfNeeded: value >> 40))
        byte(UInt8(truncatingIfNeeded: value >> 32))
        byte(UInt8(truncatingIfNeeded: value >> 24))
        byte(UInt8(truncatingIfNeeded: value >> 16))
        byte(UInt8(truncatingIfNeeded: value >> 8))
        byte(UInt8(truncatingIfNeeded: value))
    }

    private mutating func lengthDelimited(_ field: UInt8, _ value: UnsafeRawBufferPointer) {
        key(field, .lengthDelimited)
        varint(UInt64(value.count))
        copy(value)
    }

    /// A message field that is always present (also when empty), its body written by `body`.
    @inline(__always)
    mutating func message(_ field: UInt8, _ body: (inout ProtobufWriter) -> Void) {
        key(field, .lengthDelimited)
        // One byte for the length, which is nearly always below 128; a longer length moves the body along.
        let lengthAt = count
        byte(0)
        body(&self)
        let length = count - lengthAt - 1
        guard length >= 0x80 else {
            start[lengthAt] = UInt8(length)
            return
        }
        var prefix = length
        var prefixCount = 0
        while prefix > 0 {
            prefixCount += 1
            prefix >>= 7
        }
        precondition(prefixCount - 1 <= capacity - count, "ProtobufWriter: the bound given to write(bound:_:) is too small")
        let body = start + lengthAt + 1
        memmove(body + prefixCount - 1, body, length)
        count = lengthAt
        varint(UInt64(length))
        count += length
    }

    /// Bytes encoded elsewhere, as they are.
    mutating func raw(_ encoded: [UInt8]) {
        encoded.withUnsafeBytes { copy($0) }
    }

    /// A message field whose bytes were encoded elsewhere.
    mutating func message(_ field: UInt8, encoded: [UInt8]) {
        encoded.withUnsafeBytes { lengthDelimited(field, $0) }
    }
}
