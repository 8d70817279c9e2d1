import AccessoryModel
@testable import AccessoryWire
import Foundation
import SwiftProtobuf
import Testing
import TestSupport

/// OutboundEncoder gives exactly swift-protobuf's bytes for the messages the mapping layer builds: checked over many
/// random states, results and commands.
@Suite struct OutboundEncoderTests {
    /// Text of lengths around the varint boundaries, with multi-byte characters and JSON's escapes.
    static func text(_ random: inout SeededGenerator) -> String {
        let alphabet = Array("aé🎧 \"\\\tZ0")
        let length = [0, 1, 15, 16, 127, 128, 300].randomElement(using: &random)!
        return String((0..<length).map { _ in alphabet.randomElement(using: &random)! })
    }

    static func address(_ random: inout SeededGenerator) -> BluetoothAddress? {
        Bool.random(using: &random) ? BluetoothAddress(rawValue: UInt64.random(in: 0..<(1 << 48), using: &random)) : nil
    }

    static func error(_ random: inout SeededGenerator) -> AccessoryControlError? {
        [
            nil, .accessoryNotCapable(reason: "a"), .invalidRequest(reason: "r"), .invalidated(reason: ""),
            .unknown(reason: String(repeating: "x", count: 200)),
        ].randomElement(using: &random)!
    }

    /// An ownership epoch: 0 (a single bridge) most often, else any revision.
    static func epoch(_ random: inout SeededGenerator) -> UInt64 {
        [0, 0, 1, 127, 128, .max, UInt64.random(in: 0...UInt64.max, using: &random)].randomElement(using: &random)!
    }

    static func randomState(using random: inout SeededGenerator) -> AccessoryState {
        let hub = HubID(String(repeating: "h", count: Int.random(in: 1...64, using: &random)))!
        let primary = address(&random)
        let configuration = Configuration(
            devicePlacement: [nil, .inEar, .onHead, .overTheEar, .offHead].randomElement(using: &random)!,
            deviceCapabilities: Capabilities(rawValue: UInt32.random(in: 0...3, using: &random)),
            primaryAudioSourceDeviceIdentifier: primary?.data,
            secondaryAudioSourceDeviceIdentifier: primary == nil ? nil : address(&random)?.data)
        let diagnostics: [Diagnostic] = [
            .hubOffline(hub), .placementNotReported(after: .seconds(30)), .sourcesNotReported(after: .milliseconds(1500)),
            .reported(text(&random)),
        ].filter { _ in Bool.random(using: &random) }
        let accessory = Accessory(
            id: AccessoryID("acc-\(UInt32.random(in: 0...UInt32.max, using: &random))")!, hub: hub,
            registration: Registration.allCases.randomElement(using: &random)!,
            name: text(&random), model: text(&random),
            hardwareCapabilities: Capabilities(rawValue: UInt32.random(in: 0...3, using: &random)),
            configuration: configuration,
            lastSequence: [0, 1, 127, 128, .max, UInt64.random(in: 0...UInt64.max, using: &random)]
                .randomElement(using: &random)!,
            lastError: error(&random),
            updatedAt: Timestamp(
                unixMilliseconds: [0, -1, 1_763_790_000_123, .max, .min].randomElement(using: &random)!),
            isStale: Bool.random(using: &random), diagnostics: diagnostics,
            automaticSwitching: Bool.random(using: &random), pinnedSource: address(&random))
        return AccessoryState(accessory, routedSource: address(&random), epoch: epoch(&random))
    }

    @Test(arguments: 0..<8)
    func statesAndResultsAreSwiftProtobufsBytes(seed: Int) async throws {
        try await inTheBackground {
            var random = SeededGenerator(seed: UInt64(seed))
            for _ in 0..<250 {
                let state = Self.randomState(using: &random)
                let encoded = OutboundEncoder.encode(state)
                let reference: [UInt8] = try Audioaccessory_V1_AccessoryState(state).serializedBytes()
                #expect(encoded == reference, "\(state)")

                let outcome: RequestResult.Outcome =
                    switch Int.random(in: 0..<3, using: &random) {
                    case 0: .succeeded
                    case 1: .failed(Self.error(&random) ?? .unknown(reason: ""))
                    default: .notKept(Self.text(&random))
                    }
                let result = RequestResult(
                    requestID: Self.text(&random), sequence: UInt64.random(in: 0...UInt64.max, using: &random),
                    outcome: outcome, duplicate: Bool.random(using: &random),
                    state: Bool.random(using: &random) ? state : nil, epoch: Self.epoch(&random))
                let resultReference: [UInt8] = try Audioaccessory_V1_RequestResult(result).serializedBytes()
                #expect(OutboundEncoder.encode(result, state: result.state.map(OutboundEncoder.encode)) == resultReference)
            }
        }
    }

    /// A configuration longer than 127 bytes takes a two-byte length (the model never stores one: its identifiers
    /// are 6 bytes, but the encoder does not rely on that).
    @Test func longConfigurationsTakeALongerLength() throws {
        let long = Data((0..<200).map { UInt8(truncatingIfNeeded: $0) })
        let accessory = Accessory(
            id: AccessoryID("acc-long")!, hub: HubID("hub-long")!, registration: .registered,
            hardwareCapabilities: .all,
            configuration: Configuration(
                devicePlacement: .onHead, deviceCapabilities: .all, primaryAudioSourceDeviceIdentifier: long,
                secondaryAudioSourceDeviceIdentifier: long),
            updatedAt: Timestamp(unixMilliseconds: 1))
        let state = AccessoryState(accessory, routedSource: nil)
        let reference: [UInt8] = try Audioaccessory_V1_AccessoryState(state).serializedBytes()
        #expect(OutboundEncoder.encode(state) == reference)
    }

    @Test(arguments: 0..<4)
    func commandsAreSwiftProtobufsBytes(seed: Int) async throws {
        try await inTheBackground {
            var random = SeededGenerator(seed: UInt64(seed))
            for _ in 0..<500 {
                let command = SwitchCommand(
                    id: Self.text(&random), sequence: [0, 1, 128, .max].randomElement(using: &random)!,
                    source: BluetoothAddress(rawValue: UInt64.random(in: 0..<(1 << 48), using: &random))!,
                    accessoryID: AccessoryID(String(repeating: "a", count: Int.random(in: 1...64, using: &random)))!,
                    action: SwitchCommand.Action.allCases.randomElement(using: &random)!,
                    reason: SwitchCommand.Reason.allCases.randomElement(using: &random)!,
                    issuedAt: Timestamp(
                        unixMilliseconds: [0, -1, 1_763_790_000_123, .max, .min].randomElement(using: &random)!),
                    epoch: Self.epoch(&random))
                let reference: [UInt8] = try Audioaccessory_V1_SwitchCommand(command).serializedBytes()
                #expect(OutboundEncoder.encode(command) == reference, "\(command)")
            }
        }
    }

    /// The codec's public entry points take this path for protobuf and swift-protobuf's for JSON.
    @Test func theCodecEncodesProtobufHereAndJSONThroughSwiftProtobuf() throws {
        var random = SeededGenerator(seed: 99)
        let state = Self.randomState(using: &random)
        let codec = WireCodec()
        #expect(codec.encode(state, as: .protobuf) == OutboundEncoder.encode(state))
        #expect(codec.encode(state, as: .json) == (try Audioaccessory_V1_AccessoryState(state).jsonUTF8Bytes()))
    }
}
