import AccessoryModel
import AccessoryWire
import Foundation
import SwiftProtobuf
import Testing
import TestSupport

/// StateEncoder must give exactly swift-protobuf's bytes: checked over many random states.
@Suite struct StateEncoderTests {
    static func randomAccessory(using random: inout SeededGenerator) -> (Accessory, BluetoothAddress?) {
        func text(_ random: inout SeededGenerator) -> String {
            let alphabet = Array("aé🎧 \"\\\tZ0")
            let length = [0, 1, 15, 16, 127, 128, 300].randomElement(using: &random)!
            return String((0..<length).map { _ in alphabet.randomElement(using: &random)! })
        }
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
            name: text(&random), model: text(&random),
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
            let fast = StateEncoder.encodeState(accessory, routedSource: routed)
            let reference: [UInt8] = try message.serializedBytes()
            #expect(fast == reference, "\(accessory)")
            #expect(try Audioaccessory_V1_AccessoryState(serializedBytes: fast) == message)

            let error: AccessoryControlError? = [nil, .invalidRequest(reason: "r"), .unknown(reason: String(repeating: "x", count: 200))]
                .randomElement(using: &random)!
            let withState = Bool.random(using: &random)
            let result = Audioaccessory_V1_RequestResult(
                requestID: "req-\(seed)", sequence: UInt64.random(in: 0...UInt64.max, using: &random), error: error,
                state: withState ? message : nil)
            let fastResult = StateEncoder.encodeResult(
                requestID: result.requestID, sequence: result.sequence, error: error, state: withState ? fast : nil)
            #expect(fastResult == (try result.serializedBytes() as [UInt8]))
        }
    }
}
