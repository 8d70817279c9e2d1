/// Reads protobuf's binary wire format one field at a time, over bytes that stay where they are: the counterpart of
/// ``ProtobufWriter`` for ``InboundTelemetry``'s fast path.
///
/// Every read returns `nil` for anything it does not read exactly as swift-protobuf does; the caller then leaves the
/// payload to swift-protobuf, which gives the verdict and the error message.
struct ProtobufReader {
    private let bytes: UnsafeRawBufferPointer
    private var offset = 0

    init(_ bytes: UnsafeRawBufferPointer) {
        self.bytes = bytes
    }

    var isAtEnd: Bool { offset == bytes.count }

    /// The next field's key as its single byte: field numbers 1–15, which is every field the fast path reads.
    /// `nil` for a longer key.
    mutating func keyByte() -> UInt8? {
        guard offset < bytes.count, bytes[offset] < 0x80 else { return nil }
        defer { offset += 1 }
        return bytes[offset]
    }

    /// A varint, as swift-protobuf reads it: at most ten bytes, bits beyond 64 dropped.
    mutating func varint() -> UInt64? {
        var value: UInt64 = 0
        var shift: UInt64 = 0
        while offset < bytes.count, shift <= 63 {
            let byte = bytes[offset]
            offset += 1
            value |= UInt64(byte & 0x7f) &<< shift
            if byte & 0x80 == 0 { return value }
            shift += 7
        }
        return nil
    }

    /// The body of a length-delimited field, when it is all there.
    mutating func lengthDelimited() -> UnsafeRawBufferPointer? {
        guard let length = varint(), length <= UInt64(bytes.count - offset) else { return nil }
        let start = offset
        offset += Int(length)
        return UnsafeRawBufferPointer(rebasing: bytes[start..<offset])
    }

    /// A string field's text when it is ASCII, which is valid UTF-8 as it is; `nil` for anything else (swift-protobuf
    /// then validates it, and refuses invalid UTF-8).
    mutating func asciiString() -> String? {
        guard let body = lengthDelimited() else { return nil }
        let utf8 = body.assumingMemoryBound(to: UInt8.self)
        guard utf8.allSatisfy({ $0 < 0x80 }) else { return nil }
        return String(decoding: utf8, as: UTF8.self)
    }
}
