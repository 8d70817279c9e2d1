@testable import AccessoryWire
import AccessoryModel
import Foundation
import SwiftProtobuf
import Testing
import TestSupport

/// `WireCodec.readTelemetry` reads placement and sources reports without swift-protobuf. These tests hold that fast
/// path to swift-protobuf's reading: wherever it takes a payload, the result must be what swift-protobuf and
/// `request(for:)` give; and it must take the payloads hubs actually send (else it would be dead code).
@Suite struct InboundTelemetryTests {
    static let accessory = AccessoryID(WireSamples.accessoryID)!

    /// What swift-protobuf makes of `payload`: the reading the fast path must match, `nil` when it refuses it.
    static func reference(_ payload: [UInt8]) -> InboundTelemetry? {
        guard let telemetry = try? Audioaccessory_V1_AccessoryTelemetry(serializedBytes: payload) else { return nil }
        return InboundTelemetry(telemetry, for: accessory)
    }

    static func encoded(_ telemetry: Audioaccessory_V1_AccessoryTelemetry) -> [UInt8] {
        try! telemetry.serializedBytes()
    }

    /// Placement and sources reports as hubs send them, with and without each optional field.
    static var typical: [Audioaccessory_V1_AccessoryTelemetry] {
        let placements: [Audioaccessory_V1_Placement] = [.unspecified, .inEar, .onHead, .overTheEar, .offHead]
        let sources: [(Data, Data)] = [
            (Data(), Data()), (WireSamples.addressA, Data()), (WireSamples.addressA, WireSamples.addressB),
            (Data(), WireSamples.addressB), (Data([1, 2, 3]), Data()),
        ]
        var all: [Audioaccessory_V1_AccessoryTelemetry] = []
        for sequence: UInt64 in [0, 1, 300, .max] {
            for requestID in ["", "r-1"] {
                for named in ["", WireSamples.accessoryID, "someone-else"] {
                    var base = Audioaccessory_V1_AccessoryTelemetry()
                    base.sequence = sequence
                    base.requestID = requestID
                    base.accessoryID = named
                    for placement in placements {
                        var telemetry = base
                        telemetry.placement = .with { $0.placement = placement }
                        all.append(telemetry)
                    }
                    for (primary, secondary) in sources {
                        var telemetry = base
                        telemetry.sources = .with {
                            $0.primary = primary
                            $0.secondary = secondary
                        }
                        all.append(telemetry)
                    }
                }
            }
        }
        return all
    }

    @Test func takesTypicalReportsAndReadsThemAsSwiftProtobufDoes() throws {
        for telemetry in Self.typical {
            let payload = Self.encoded(telemetry)
            let fast = try #require(InboundTelemetry(reportIn: payload, for: Self.accessory), "\(telemetry)")
            #expect(fast == Self.reference(payload), "\(telemetry)")
        }
    }

    @Test func readsFieldsInAnyOrder() throws {
        // placement ON_HEAD, then accessory_id, request_id "r", sequence 7: valid protobuf, out of field order.
        let payload: [UInt8] =
            [0x72, 0x02, 0x08, 0x02, 0x1a, 0x08] + Array(WireSamples.accessoryID.utf8) + [0x12, 0x01, 0x72, 0x08, 0x07]
        let fast = try #require(InboundTelemetry(reportIn: payload, for: Self.accessory))
        #expect(fast == InboundTelemetry(sequence: 7, requestID: "r", request: .success(.placement(.onHead))))
        #expect(fast == Self.reference(payload))
    }

    /// Payloads the fast path leaves to swift-protobuf, each for its own reason.
    @Test(arguments: [
        ("another event", encoded(WireSamples.telemetryRegister)),
        ("no event", encoded(.with { $0.sequence = 5 })),
        ("empty payload", []),
        ("sequence twice", [0x08, 0x01, 0x08, 0x02, 0x72, 0x00]),
        ("placement twice", [0x72, 0x02, 0x08, 0x01, 0x72, 0x02, 0x08, 0x02]),
        ("placement value twice inside", [0x72, 0x04, 0x08, 0x01, 0x08, 0x02]),
        ("two events", [0x72, 0x00, 0x7a, 0x00]),
        ("unknown top-level field", [0x72, 0x00, 0x20, 0x01]),
        ("unknown field in the report", [0x72, 0x02, 0x10, 0x01]),
        ("placement beyond the enum", [0x72, 0x02, 0x08, 0x05]),
        ("placement 2^32 + 2", [0x72, 0x06, 0x08, 0x82, 0x80, 0x80, 0x80, 0x10]),
        ("non-ASCII request id", [0x12, 0x02, 0xC3, 0xA9, 0x72, 0x00]),
        ("invalid UTF-8 request id", [0x12, 0x01, 0xFF, 0x72, 0x00]),
        ("truncated report", [0x72, 0x05, 0x08]),
        ("truncated varint", [0x72, 0x00, 0x08, 0x80]),
        ("eleven-byte varint", [0x72, 0x00, 0x08] + [UInt8](repeating: 0x80, count: 10) + [0x01]),
        ("wrong wire type for the sequence", [0x09] + [UInt8](repeating: 0, count: 8) + [0x72, 0x00]),
        ("a two-byte key", [0x72, 0x00, 0x80, 0x01, 0x00]),
    ] as [(String, [UInt8])])
    func leavesTheRestToSwiftProtobuf(reason: String, payload: [UInt8]) {
        #expect(InboundTelemetry(reportIn: payload, for: Self.accessory) == nil, "\(reason)")
    }

    @Test func readsOverlongVarintsAsSwiftProtobufDoes() throws {
        // Sequence 1 in ten bytes, the last carrying bits beyond 64 (swift-protobuf drops them), and placement
        // IN_EAR in two bytes.
        let payload: [UInt8] =
            [0x08, 0x81] + [UInt8](repeating: 0x80, count: 8) + [0x7e, 0x72, 0x03, 0x08, 0x81, 0x00]
        let fast = try #require(InboundTelemetry(reportIn: payload, for: Self.accessory))
        #expect(fast.sequence == 1)
        #expect(fast == Self.reference(payload))
    }

    /// Random mutations of every telemetry sample: wherever the fast path takes one, it agrees with swift-protobuf,
    /// and it takes nothing swift-protobuf refuses.
    @Test func agreesWithSwiftProtobufOnMutatedPayloads() {
        var random = SeededGenerator(seed: 0x7E1E_3E7E)
        let seeds = Self.typical.map(Self.encoded) + [
            WireSamples.telemetryPaired, WireSamples.telemetryUnpaired, WireSamples.telemetryRegister,
            WireSamples.telemetryUpdate, WireSamples.telemetryPlacement, WireSamples.telemetrySources,
        ].map(Self.encoded)
        var taken = 0
        var refused = 0
        for _ in 0..<40_000 {
            var payload = seeds.randomElement(using: &random)!
            for _ in 0..<Int.random(in: 1...3, using: &random) {
                Self.mutate(&payload, using: &random)
            }
            let reference = Self.reference(payload)
            guard let fast = InboundTelemetry(reportIn: payload, for: Self.accessory) else {
                refused += 1
                continue
            }
            taken += 1
            #expect(fast == reference, "payload \(payload)")
        }
        // Both outcomes occur, so the comparison above ran many times.
        #expect(taken > 1_000)
        #expect(refused > 1_000)
    }

    /// readTelemetry gives swift-protobuf's reading for every sample, in both formats, whichever path it takes.
    @Test func readTelemetryMatchesSwiftProtobufInBothFormats() throws {
        let codec = WireCodec()
        for telemetry in Self.typical + [WireSamples.telemetryPaired, WireSamples.telemetryUpdate] {
            let expected = InboundTelemetry(telemetry, for: Self.accessory)
            #expect(try codec.readTelemetry(from: Self.encoded(telemetry), format: .protobuf, for: Self.accessory) == expected)
            let json: [UInt8] = try telemetry.jsonUTF8Bytes()
            #expect(try codec.readTelemetry(from: json, format: .json, for: Self.accessory) == expected)
        }
    }

    @Test func readTelemetryRefusesWhatSwiftProtobufRefuses() {
        let codec = WireCodec(maximumPayloadSize: 8)
        var large = Audioaccessory_V1_AccessoryTelemetry()
        large.requestID = "a long request id"
        large.placement = Audioaccessory_V1_PlacementReport()
        let tooLarge = Self.encoded(large)
        #expect(throws: WireError.self) { try codec.readTelemetry(from: tooLarge, format: .protobuf, for: Self.accessory) }
        #expect(throws: WireError.self) { try codec.readTelemetry(from: [0x72, 0x05, 0x08], format: .protobuf, for: Self.accessory) }
    }

    static func mutate(_ payload: inout [UInt8], using random: inout SeededGenerator) {
        let interesting: [UInt8] = [0x00, 0x01, 0x02, 0x05, 0x08, 0x10, 0x12, 0x1a, 0x72, 0x7a, 0x7f, 0x80, 0xc3, 0xff]
        let byte = Bool.random(using: &random)
            ? interesting.randomElement(using: &random)! : UInt8.random(in: 0...255, using: &random)
        switch Int.random(in: 0..<4, using: &random) {
        case 0 where !payload.isEmpty:
            payload[Int.random(in: 0..<payload.count, using: &random)] = byte
        case 1:
            payload.insert(byte, at: Int.random(in: 0...payload.count, using: &random))
        case 2 where !payload.isEmpty:
            payload.remove(at: Int.random(in: 0..<payload.count, using: &random))
        default:
            payload.removeLast(Int.random(in: 0...min(3, payload.count), using: &random))
        }
    }
}
