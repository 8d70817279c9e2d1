import Foundation
import SwiftProtobuf

/// Reads and writes the messages of the contract in either payload format.
public struct WireCodec: Sendable {
    /// The largest payload accepted, in bytes (64 KiB unless configured).
    public var maximumPayloadSize: Int

    public init(maximumPayloadSize: Int = 64 * 1024) {
        self.maximumPayloadSize = maximumPayloadSize
    }

    private static let strictJSON = JSONDecodingOptions()
    private static let lenientJSON: JSONDecodingOptions = {
        var options = JSONDecodingOptions()
        options.ignoreUnknownFields = true
        return options
    }()

    /// Decodes `payload` as `M` in `format`, or explains what is wrong with it.
    func decode<M: SwiftProtobuf.Message, Bytes: SwiftProtobufContiguousBytes>(
        _ type: M.Type, from payload: Bytes, format: PayloadFormat
    ) throws(WireError) -> M {
        guard payload.count <= maximumPayloadSize else {
            throw WireError(
                .tooLarge, "the payload is \(payload.count) bytes; the limit is \(maximumPayloadSize) bytes")
        }
        do {
            switch format {
            case .protobuf:
                return try M(serializedBytes: payload)
            case .json:
                return try Self.decodeJSON(M.self, from: payload)
            }
        } catch let error as BinaryDecodingError {
            throw WireError(.malformedProtobuf, "malformed protobuf \(M.protoMessageName): \(Self.explain(error))")
        } catch let error as JSONDecodingError {
            throw WireError(.malformedJSON, "malformed JSON for \(M.protoMessageName): \(Self.explain(error))")
        } catch {
            throw WireError(
                format == .json ? .malformedJSON : .malformedProtobuf,
                "cannot decode \(M.protoMessageName) from \(format): \(error)")
        }
    }

    /// Decodes JSON, ignoring unknown fields (a newer sender may add some) but not unknown enum value names.
    ///
    /// swift-protobuf's `ignoreUnknownFields` also drops enum value names it does not know, which would turn a
    /// misspelt `"PLACEMENT_ONHEAD"` into "no placement" without a word. So: decode strictly; only when that finds
    /// an unknown field, decode leniently, and confirm that strict decoding of the payload without its unknown
    /// fields meets no unknown enum value either.
    private static func decodeJSON<M: SwiftProtobuf.Message, Bytes: SwiftProtobufContiguousBytes>(
        _ type: M.Type, from payload: Bytes
    ) throws -> M {
        let unknownField: String
        do {
            return try M(jsonUTF8Bytes: payload, options: strictJSON)
        } catch JSONDecodingError.unknownField(let name) {
            unknownField = name
        }
        let lenient = try M(jsonUTF8Bytes: payload, options: lenientJSON)
        var tree = try payload.withUnsafeBytes { try JSONSerialization.jsonObject(with: Data($0)) }
        var name = unknownField
        for _ in 0..<64 {
            tree = removing(key: name, from: tree)
            let pruned = try JSONSerialization.data(withJSONObject: tree)
            do {
                _ = try M(jsonUTF8Bytes: pruned, options: strictJSON)
                return lenient
            } catch JSONDecodingError.unknownField(let next) {
                name = next
            } catch JSONDecodingError.unrecognizedEnumValue {
                throw JSONDecodingError.unrecognizedEnumValue
            } catch {
                // The pruned text differs in some other way (number precision, say): keep the lenient result.
                return lenient
            }
        }
        return lenient
    }

    /// `tree` without `key` in any of its objects.
    private static func removing(key: String, from tree: Any) -> Any {
        if let object = tree as? [String: Any] {
            return object.filter { $0.key != key }.mapValues { removing(key: key, from: $0) }
        }
        if let array = tree as? [Any] {
            return array.map { removing(key: key, from: $0) }
        }
        return tree
    }

    /// Encodes `message` in `format`.
    func encode(_ message: some SwiftProtobuf.Message, as format: PayloadFormat) -> [UInt8] {
        do {
            switch format {
            case .protobuf: return try message.serializedBytes()
            case .json: return try message.jsonUTF8Bytes()
            }
        } catch {
            // Only messages with unset required fields (proto2) or non-finite floats fail to encode; the contract
            // has neither, so this cannot happen for its messages.
            preconditionFailure("encoding \(type(of: message).protoMessageName) failed: \(error)")
        }
    }

    private static func explain(_ error: BinaryDecodingError) -> String {
        switch error {
        case .truncated: "the data is truncated"
        case .invalidUTF8: "a string field is not valid UTF-8"
        case .malformedProtobuf: "the data is not valid protobuf"
        case .trailingGarbage: "there are extra bytes after the message"
        case .messageDepthLimit: "messages are nested too deeply"
        case .missingRequiredFields: "required fields are missing"
        default: "\(error)"
        }
    }

    private static func explain(_ error: JSONDecodingError) -> String {
        switch error {
        case .failure: "not valid JSON"
        case .malformedNumber: "a number is malformed"
        case .numberRange: "a number is out of range"
        case .malformedMap: "a map is malformed"
        case .malformedBool: "a boolean is malformed"
        case .malformedString: "a string is malformed or not valid UTF-8"
        case .invalidUTF8: "the text is not valid UTF-8"
        case .missingFieldNames: "an object key is missing"
        case .schemaMismatch: "a value does not have the field's type"
        case .unrecognizedEnumValue: "an enum value name is not known (see the enum's values in Schemas/)"
        case .illegalNull: "a field is null where null is not allowed"
        case .unquotedMapKey: "a map key is not quoted"
        case .leadingZero: "a number has a leading zero"
        case .truncated: "the text is truncated"
        case .malformedDuration, .malformedTimestamp, .malformedFieldMask: "a well-known type is malformed"
        case .trailingGarbage: "there is extra text after the object"
        case .conflictingOneOf: "more than one field of a oneof is set"
        case .messageDepthLimit: "objects are nested too deeply"
        case .unknownField(let name): "unknown field '\(name)'"
        }
    }
}
