@testable import AccessoryWire
import Foundation
import SwiftProtobuf
import Testing

/// Every message of the contract round-trips through the canonical protobuf JSON mapping, the format people use
/// with mosquitto_pub.
@Suite struct JSONMappingTests {
    static func roundTrip<M: SwiftProtobuf.Message>(_ message: M) throws -> (json: String, back: M) {
        let codec = WireCodec()
        let json = codec.encode(message, as: .json)
        #expect(try PayloadFormat.detect(contentType: nil, payload: json) == .json)
        return (String(decoding: json, as: UTF8.self), try codec.decode(M.self, from: json, format: .json))
    }

    @Test(arguments: WireSamples.all.map(\.name))
    func everySampleRoundTrips(_ name: String) throws {
        let sample = try #require(WireSamples.sample(named: name))
        let (json, back) = try Self.roundTrip(sample)
        #expect(back.isEqualTo(message: sample), "\(json)")
        // The canonical mapping: lowerCamelCase names, enum names, 64-bit integers as strings.
        #expect(!json.contains("_id\""), "\(json)")
        #expect(try JSONSerialization.jsonObject(with: Data(json.utf8)) is [String: Any])
    }

    @Test func theMappingIsCanonical() throws {
        let (json, _) = try Self.roundTrip(WireSamples.telemetryRegister)
        #expect(json.contains(#""capabilities":["CAPABILITY_HEAD_TRACKING","CAPABILITY_AUDIO_SPATIALIZATION"]"#))
        #expect(json.contains(#""spatialExtensionDescription":{"componentType":2735,"#), "uint32 as numbers")
        #expect(json.contains(#""sequence":"43""#))
        #expect(json.contains(#""requestId":"req-0003""#))
        let (sources, _) = try Self.roundTrip(WireSamples.telemetrySources)
        #expect(sources.contains(#""primary":"3vABI0Vn""#), "bytes are base64 (DE:F0:01:23:45:67): \(sources)")
    }
}
