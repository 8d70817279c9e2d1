import AccessoryModel
import AccessoryWire
import Foundation
import SwiftProtobuf
import Testing
import TestSupport

/// OutboundEncoder must give exactly swift-protobuf's bytes: checked over many random states, results and commands.
@Suite struct OutboundEncoderTests {
    /// Text of the lengths around the varint boundaries, with multi-byte characters and JSON's escapes.
    static func text(_ random: inout SeededGenerator) -> String {
        let alphabet = Array("aé🎧 \"\\\tZ0")
        let length = [0, 1, 15, 16, 127, 128, 300].randomElement(using: &random)!
        return String((0..<length).map { _ in alphabet.randomElement(using: &random)! })
    }

    static func randomAccessory(using random: inout SeededGenerator) -> (Accessory, BluetoothAddress?) {
        func address(_ random: inout SeededGenerator) -> BluetoothAddress? {
            Bool.random(using: &random) ? BluetoothAddress(rawValue: UInt64.random(in: 0..<(1 << 48), using: &random)) : nil
        }
        let hub = HubID(String(repeating: "h", count: Int.random(in: 1...64, using: &random)))!
        let primary = address(&random)
        let configuration = Configuration(
            devicePlacement: [nil, .inEar, .onHead, .overTheEar, .offHead].randomElement(using: &random)!,
            deviceCapabilities: Capabilities(rawValue: UInt32.random(in: 0...3, using: &random)),
            primaryAudioSourceDeviceIdentifier: primary?.data,
            secondaryAudioSourceDeviceIdentifier: primary == nil ? nil : address(&random)?.data)
        let diagnostics: [Diagnostic] = [.hubOffline(hub), .placementNotReported(after: .seconds(30)),
            .sourcesNotReported(after: .milliseconds(1500))].filter { _ in Bool.random(using: &random) }
        let accessory = Accessory(
            id: AccessoryID("acc-\(UInt32.random(in: 0...UInt32.max, using: &random))")!, hub: hub,
            registration: Registration.allCases.randomElement(using: &random)!,
            name: Self.text(&random), model: Self.text(&random),
            hardwareCapabilities: Capabilities(rawValue: UInt32.random(in: 0...3, using: &random)),
            configuration: configuration,
            lastSequence: [0, 1, 127, 128, .max, UInt64.random(in: 0...UInt64.max, using: &random)].randomElement(using: &random)!,
            updatedAt: Timestamp(unixMilliseconds: [0, -1, 1_763_790_000_123, .max, .min].randomElement(using: &random)!),
            isStale: Bool.random(using: &random), diagnostics: diagnostics)
        return (accessory, address(&random))
    }

    @Test(arguments: 0..<8)
    func encodesExactlyAsSwiftProtobuf(seed: Int) throws {
        var random = SeededGenerator(seed: UInt64(seed))
        for _ in 0..<250 {
            let (accessory, routed) = Self.randomAccessory(using: &random)
            let message = Audioaccessory_V1_AccessoryState(accessory, routedSource: routed)
            let fast = OutboundEncoder.encodeState(accessory, routedSource: routed)
            let reference: [UInt8] = try message.serializedBytes()
            #expect(fast == reference, "\(accessory)")
            #expect(try Audioaccessory_V1_AccessoryState(serializedBytes: fast) == message)

            let error: AccessoryControlError? = [
                nil, .accessoryNotCapable(reason: "a"), .invalidRequest(reason: "r"), .invalidated(reason: ""),
                .unknown(reason: String(repeating: "x", count: 200)),
            ]
                .randomElement(using: &random)!
            let withState = Bool.random(using: &random)
            let result = Audioaccessory_V1_RequestResult(
                requestID: Self.text(&random), sequence: UInt64.random(in: 0...UInt64.max, using: &random), error: error,
                state: withState ? message : nil)
            let fastResult = OutboundEncoder.encodeResult(
                requestID: result.requestID, sequence: result.sequence, error: error, state: withState ? fast : nil)
            let referenceResult: [UInt8] = try result.serializedBytes()
            #expect(fastResult == referenceResult)
        }
    }

    /// A configuration message longer than 127 bytes takes a two-byte length (the model never stores one: its
    /// identifiers are 6 bytes, but the encoder does not rely on that).
    @Test func longConfigurationsTakeALongerLength() throws {
        let long = Data((0..<200).map { UInt8(truncatingIfNeeded: $0) })
        let accessory = Accessory(
            id: AccessoryID("acc-long")!, hub: HubID("hub-long")!, registration: .registered,
            hardwareCapabilities: .all,
            configuration: Configuration(
                devicePlacement: .onHead, deviceCapabilities: .all, primaryAudioSourceDeviceIdentifier: long,
                secondaryAudioSourceDeviceIdentifier: long),
            updatedAt: Timestamp(unixMilliseconds: 1))
        let reference: [UInt8] = try Audioaccessory_V1_AccessoryState(accessory, routedSource: nil).serializedBytes()
        #expect(OutboundEncoder.encodeState(accessory, routedSource: nil) == reference)
    }

    @Test(arguments: 0..<4)
    func encodesCommandsExactlyAsSwiftProtobuf(seed: Int) throws {
        var random = SeededGenerator(seed: UInt64(seed))
        for _ in 0..<500 {
            let command = SwitchCommand(
                id: Self.text(&random), sequence: [0, 1, 128, .max].randomElement(using: &random)!,
                source: BluetoothAddress(rawValue: UInt64.random(in: 0..<(1 << 48), using: &random))!,
                accessoryID: AccessoryID(String(repeating: "a", count: Int.random(in: 1...64, using: &random)))!,
                action: SwitchCommand.Action.allCases.randomElement(using: &random)!,
                reason: SwitchCommand.Reason.allCases.randomElement(using: &random)!,
                issuedAt: Timestamp(unixMilliseconds: [0, -1, 1_763_790_000_123, .max, .min].randomElement(using: &random)!))
            let reference: [UInt8] = try Audioaccessory_V1_SwitchCommand(command).serializedBytes()
            #expect(OutboundEncoder.encodeCommand(command) == reference, "\(command)")
        }
    }
}
