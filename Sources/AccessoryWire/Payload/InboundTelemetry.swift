import AccessoryModel
import Foundation

/// Telemetry as the bridge reads it: its sequence, its request id, and the request it makes of the accessory its
/// topic names (or why it makes none, which the hub is told with this sequence and request id).
public struct InboundTelemetry: Hashable, Sendable {
    /// The hub's sequence (0: unsequenced).
    public var sequence: UInt64
    /// Echoed in the RequestResult.
    public var requestID: String
    /// The request, or the error that answers it.
    public var request: Result<AccessoryRequest, AccessoryControlError>

    public init(sequence: UInt64, requestID: String, request: Result<AccessoryRequest, AccessoryControlError>) {
        self.sequence = sequence
        self.requestID = requestID
        self.request = request
    }

    /// The telemetry swift-protobuf decoded, mapped to the model.
    public init(_ telemetry: Audioaccessory_V1_AccessoryTelemetry, for accessory: AccessoryID) {
        self.init(
            sequence: telemetry.sequence, requestID: telemetry.requestID,
            request: Result { () throws(AccessoryControlError) in try telemetry.request(for: accessory) })
    }
}

extension WireCodec {
    /// Reads telemetry for `accessory` from `payload` in `format`, or explains why the payload is unreadable.
    ///
    /// Placement and sources reports in binary protobuf — nearly all telemetry — are read straight from the bytes
    /// (``InboundTelemetry/init(reportIn:for:)``); everything else, and anything unusual about those, goes through
    /// swift-protobuf and ``Audioaccessory_V1_AccessoryTelemetry/request(for:)``. Both give the same result for
    /// every payload the fast path takes (a differential test and the fuzzer hold them to it).
    public func readTelemetry(from payload: [UInt8], format: PayloadFormat, for accessory: AccessoryID)
        throws(WireError) -> InboundTelemetry
    {
        if format == .protobuf, payload.count <= maximumPayloadSize,
            let telemetry = InboundTelemetry(reportIn: payload, for: accessory)
        {
            return telemetry
        }
        let telemetry = try decode(Audioaccessory_V1_AccessoryTelemetry.self, from: payload, format: format)
        return InboundTelemetry(telemetry, for: accessory)
    }
}

extension InboundTelemetry {
    /// Reads a placement or sources report in binary protobuf without swift-protobuf, or returns `nil` for anything
    /// else: another event, no event, an unknown field, a field twice, a placement value outside the enum, a string
    /// that is not ASCII, a truncation. `nil` is never a verdict; swift-protobuf then reads the payload.
    ///
    /// Every field here has a number below 16, so each key is one byte: wire type 0 for a varint, 2 for
    /// length-delimited.
    init?(reportIn payload: [UInt8], for accessory: AccessoryID) {
        let read: InboundTelemetry? = payload.withUnsafeBytes { bytes in
            var reader = ProtobufReader(bytes)
            var sequence: UInt64?
            var requestID: String?
            var named: String?
            var request: AccessoryRequest?
            while !reader.isAtEnd {
                switch reader.keyByte() {
                case 1 << 3 | 0 where sequence == nil:  // sequence
                    guard let value = reader.varint() else { return nil }
                    sequence = value
                case 2 << 3 | 2 where requestID == nil:  // request_id
                    guard let value = reader.asciiString() else { return nil }
                    requestID = value
                case 3 << 3 | 2 where named == nil:  // accessory_id
                    guard let value = reader.asciiString() else { return nil }
                    named = value
                case 14 << 3 | 2 where request == nil:  // placement
                    guard let body = reader.lengthDelimited(), let placement = Self.placement(in: body) else { return nil }
                    request = .placement(placement)
                case 15 << 3 | 2 where request == nil:  // sources
                    guard let body = reader.lengthDelimited(), let sources = Self.sources(in: body) else { return nil }
                    request = sources
                default:
                    return nil
                }
            }
            guard let request else { return nil }
            let checked: Result<AccessoryRequest, AccessoryControlError>
            if let named, !named.isEmpty, named != accessory.rawValue {
                checked = .failure(Audioaccessory_V1_AccessoryTelemetry.mismatch(named: named, topic: accessory))
            } else {
                checked = .success(request)
            }
            return InboundTelemetry(sequence: sequence ?? 0, requestID: requestID ?? "", request: checked)
        }
        guard let read else { return nil }
        self = read
    }

    /// A PlacementReport's placement (`.some(nil)` for UNSPECIFIED or none); `nil` for anything unusual.
    private static func placement(in body: UnsafeRawBufferPointer) -> Placement?? {
        var reader = ProtobufReader(body)
        var value: UInt64 = 0
        var seen = false
        while !reader.isAtEnd {
            guard !seen, reader.keyByte() == 1 << 3 | 0, let read = reader.varint() else { return nil }
            value = read
            seen = true
        }
        switch value {
        case 0: return .some(nil)
        case 1: return .inEar
        case 2: return .onHead
        case 3: return .overTheEar
        case 4: return .offHead
        default: return nil
        }
    }

    /// A SourcesReport as a request (empty identifiers are none); `nil` for anything unusual.
    private static func sources(in body: UnsafeRawBufferPointer) -> AccessoryRequest? {
        var reader = ProtobufReader(body)
        var primary: Data?
        var secondary: Data?
        while !reader.isAtEnd {
            switch reader.keyByte() {
            case 1 << 3 | 2 where primary == nil:
                guard let value = reader.lengthDelimited() else { return nil }
                primary = Data(value)
            case 2 << 3 | 2 where secondary == nil:
                guard let value = reader.lengthDelimited() else { return nil }
                secondary = Data(value)
            default:
                return nil
            }
        }
        return .sources(primary: primary?.nilWhenEmpty, secondary: secondary?.nilWhenEmpty)
    }
}
