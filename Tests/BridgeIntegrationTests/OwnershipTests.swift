import AccessoryBridge
import AccessoryModel
@testable import AccessoryWire
import Foundation
import MQTTClient
import Testing
import TestSupport

/// Each hub owns only its own accessories, through a real broker and bridge: the scenario a new user found, with
/// mosquitto_pub and JSON, where one message from another hub silenced hub-1's headphones and leaked their pairing.
@Suite struct OwnershipTests {
    static let t1 = "audio/hubs/hub-1/accessories/hp/telemetry"
    static let t2 = "audio/hubs/hub-2/accessories/hp/telemetry"
    static let r1 = "audio/hubs/hub-1/accessories/hp/result"
    static let r2 = "audio/hubs/hub-2/accessories/hp/result"

    @Test func anotherHubCanNeitherSilenceNorReadAnAccessory() async throws {
        let broker = try await MosquittoBroker()
        let bridge = try await BridgeIntegrationTests.startBridge(on: broker) { $0.payloadFormat = .json }
        let peer = try await Peer("hubs", broker: broker, subscribe: ["audio/hubs/#"])

        func send(_ topic: String, _ json: String, answerOn result: String) async throws -> Audioaccessory_V1_RequestResult {
            let before = peer.messages(on: result).count
            try peer.client.publish(
                MQTTMessage(topic: topic, payload: Array(json.utf8), properties: MQTTProperties(contentType: "application/json")))
            let answer = try await peer.waitFor(before + 1, on: result)[before]
            return try peer.codec.decode(Audioaccessory_V1_RequestResult.self, from: answer.payload, format: .json)
        }

        let paired = try await send(Self.t1,
            #"{"sequence":"1","requestId":"h1-pair","paired":{"name":"Secret Name","hardwareCapabilities":["CAPABILITY_AUDIO_SWITCHING"]}}"#,
            answerOn: Self.r1)
        #expect(paired.error == .none)
        #expect(try await send(Self.t1, #"{"sequence":"2","requestId":"h1-reg","register":{"capabilities":["CAPABILITY_AUDIO_SWITCHING"]}}"#,
            answerOn: Self.r1).error == .none)

        // hub-2, with a sequence far above hub-1's: refused, with its own request id and nothing of hub-1's state.
        let forged = try await send(Self.t2,
            #"{"sequence":"1000","requestId":"h2-x","register":{"capabilities":["CAPABILITY_AUDIO_SWITCHING"]}}"#,
            answerOn: Self.r2)
        #expect(forged.requestID == "h2-x" && forged.sequence == 1000)
        #expect(forged.error == .invalidRequest)
        #expect(forged.message.contains("belongs to another hub"))
        #expect(!forged.hasState && !forged.duplicate)

        // hub-2 repeating hub-1's sequence 1 gets no cached answer of hub-1's either.
        let repeated = try await send(Self.t2,
            #"{"sequence":"1","requestId":"h2-pair","paired":{"name":"Mine","hardwareCapabilities":["CAPABILITY_AUDIO_SWITCHING"]}}"#,
            answerOn: Self.r2)
        #expect(repeated.requestID == "h2-pair" && repeated.error == .invalidRequest && !repeated.hasState)
        #expect(!repeated.message.contains("Secret Name") && !repeated.duplicate)

        // hub-1's sequence 3 is simply the next one: applied, no gap, no rebirth request anywhere.
        let sources = try await send(Self.t1, #"{"sequence":"3","requestId":"h1-src","sources":{"primary":"EjRWeJq8"}}"#,
            answerOn: Self.r1)
        #expect(sources.error == .none && !sources.duplicate)
        #expect(sources.state.configuration.primaryAudioSourceDeviceIdentifier == Data([0x12, 0x34, 0x56, 0x78, 0x9A, 0xBC]))
        #expect(sources.state.lastSequence == 3)
        #expect(sources.state.name == "Secret Name", "hub-2's pairing changed nothing")

        // A retry of hub-1's last request gets its original outcome, marked as a repeat.
        let retry = try await send(Self.t1, #"{"sequence":"3","requestId":"h1-src","sources":{"primary":"EjRWeJq8"}}"#,
            answerOn: Self.r1)
        #expect(retry.duplicate && retry.error == .none && retry.requestID == "h1-src")
        #expect(retry.state == sources.state)
        // A rebirth request is published after the answer it comes with: once the retry's answer is in, one for any
        // earlier request would be too.
        #expect(peer.messages(on: "audio/hubs/hub-1/rebirth").isEmpty)
        #expect(peer.messages(on: "audio/hubs/hub-2/rebirth").isEmpty)

        await peer.close()
        try await bridge.stop()
    }
}
