@testable import AccessoryWire
import Foundation
import SwiftProtobuf
import Testing

@Suite struct WireCodecTests {
    let codec = WireCodec()

    static var telemetry: Audioaccessory_V1_AccessoryTelemetry {
        .with {
            $0.sequence = 42
            $0.requestID = "r-1"
            $0.placement = .with { $0.placement = .onHead }
        }
    }

    @Test(arguments: PayloadFormat.allCases)
    func roundTripsInEitherFormat(_ format: PayloadFormat) throws {
        let bytes = codec.encode(Self.telemetry, as: format)
        #expect(try PayloadFormat.detect(contentType: nil, payload: bytes) == format)
        #expect(try codec.decode(Audioaccessory_V1_AccessoryTelemetry.self, from: bytes, format: format) == Self.telemetry)
        #expect(try codec.decode(Audioaccessory_V1_AccessoryTelemetry.self, from: Data(bytes), format: format) == Self.telemetry)
    }

    @Test func jsonIsTheCanonicalMapping() throws {
        let json = String(decoding: codec.encode(Self.telemetry, as: .json), as: UTF8.self)
        #expect(json == #"{"sequence":"42","requestId":"r-1","placement":{"placement":"PLACEMENT_ON_HEAD"}}"#)
    }

    @Test func unknownJSONFieldsAreIgnored() throws {
        let json = #"{"sequence": 42, "requestId": "r-1", "fromTheFuture": {"x": [1, 2]}, "placement": {"placement": "PLACEMENT_ON_HEAD", "confidence": 0.9}}"#
        let decoded = try codec.decode(Audioaccessory_V1_AccessoryTelemetry.self, from: Array(json.utf8), format: .json)
        #expect(decoded == Self.telemetry)
    }

    @Test func unknownFieldsThatShareANameWithKnownOnesAreIgnoredOnlyWhereUnknown() throws {
        // "sequence" is known at the top and unknown inside placement.
        let json = #"{"sequence": "42", "requestId": "r-1", "placement": {"sequence": 7, "placement": "PLACEMENT_ON_HEAD"}}"#
        let decoded = try codec.decode(Audioaccessory_V1_AccessoryTelemetry.self, from: Array(json.utf8), format: .json)
        #expect(decoded == Self.telemetry)
    }

    @Test func enumNumbersAndProtoFieldNamesAreAcceptedInJSON() throws {
        let json = #"{"sequence": "42", "request_id": "r-1", "placement": {"placement": 2}}"#
        let decoded = try codec.decode(Audioaccessory_V1_AccessoryTelemetry.self, from: Array(json.utf8), format: .json)
        #expect(decoded == Self.telemetry)
    }

    static let badPayloads: [(String, [UInt8], PayloadFormat, WireError.Kind, String)] = [
        ("truncated", [0x08], .protobuf, .malformedProtobuf, "malformed protobuf audioaccessory.v1.AccessoryTelemetry: the data is truncated"),
        ("a length beyond the end", [0x12, 0x05, 0x61], .protobuf, .malformedProtobuf, "truncated"),
        ("invalid UTF-8 in a string", [0x12, 0x02, 0xC3, 0x28], .protobuf, .malformedProtobuf, "not valid UTF-8"),
        ("a reserved wire type", [0x0F], .protobuf, .malformedProtobuf, "not valid protobuf"),
        ("not JSON", Array("{sequence: 1".utf8), .json, .malformedJSON, "malformed JSON for audioaccessory.v1.AccessoryTelemetry"),
        ("a string for a number", Array(#"{"sequence": "many"}"#.utf8), .json, .malformedJSON, "malformed"),
        ("an unknown enum name", Array(#"{"placement": {"placement": "PLACEMENT_SIDEWAYS"}}"#.utf8), .json, .malformedJSON, "enum value name is not known"),
        ("a misspelt enum name next to an unknown field",
         Array(#"{"extra": 1, "placement": {"placement": "PLACEMENT_ONHEAD"}}"#.utf8), .json, .malformedJSON,
         "enum value name is not known"),
        ("a misspelt enum name before an unknown field",
         Array(#"{"register": {"capabilities": ["CAPABILITY_PLACEMENT", "CAPABILITY_SWITCHING"]}, "extra": 1}"#.utf8),
         .json, .malformedJSON, "enum value name is not known"),
        ("two members of the oneof", Array(#"{"unpaired": {}, "register": {}}"#.utf8), .json, .malformedJSON, "more than one field of a oneof"),
        ("trailing text", Array(#"{"sequence": 1} x"#.utf8), .json, .malformedJSON, "extra text"),
    ]

    @Test(arguments: badPayloads)
    func badPayloadsAreExplained(_ name: String, _ payload: [UInt8], _ format: PayloadFormat, _ kind: WireError.Kind, _ reason: String) {
        let error = #expect(throws: WireError.self, "\(name)") {
            try codec.decode(Audioaccessory_V1_AccessoryTelemetry.self, from: payload, format: format)
        }
        #expect(error?.kind == kind, "\(name)")
        #expect(error?.reason.contains(reason) == true, "\(name): \(error?.reason ?? "no error")")
    }

    @Test func oversizedPayloadsAreRefusedBeforeDecoding() throws {
        let limited = WireCodec(maximumPayloadSize: 16)
        let bytes = limited.encode(Self.telemetry, as: .json)
        let error = #expect(throws: WireError.self) {
            try limited.decode(Audioaccessory_V1_AccessoryTelemetry.self, from: bytes, format: .json)
        }
        #expect(error?.kind == .tooLarge)
        #expect(error?.reason == "the payload is \(bytes.count) bytes; the limit is 16 bytes")
        #expect(WireCodec().maximumPayloadSize == 65_536)
    }
}
