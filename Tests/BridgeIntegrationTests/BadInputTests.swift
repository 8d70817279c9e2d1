import AccessoryBridge
import AccessoryModel
@testable import AccessoryWire
import Foundation
import MQTTClient
import MetricsTestKit
import Testing
import TestSupport

/// Bad input through a real broker: each gets a result with the right AudioAccessoryKit error and a message naming
/// the problem (where the topic names an accessory), a log line with the topic and a counter; nothing crashes,
/// nothing hangs, no state changes; and the bridge still routes a good message afterwards.
@Suite struct BadInputTests {
    struct Case: Sendable, CustomTestStringConvertible {
        var name: String
        var topic: String
        var payload: [UInt8]
        var contentType: String?
        /// The result's error and a part of its message; nil when no result is due (the topic names no accessory).
        var error: AccessoryControlError.Code?
        var message: String
        /// The counter that must go up: `label` with `dimension`.
        var counter: (label: String, dimension: (String, String)?)

        var testDescription: String { name }
    }

    static let telemetry = "audio/hubs/hub-1/accessories/headphones/telemetry"
    static let resultTopic = "audio/hubs/hub-1/accessories/headphones/result"
    static let codec = WireCodec()
    static let phone = BluetoothAddress("12:34:56:78:9A:BC")!

    static func json(_ text: String) -> [UInt8] { Array(text.utf8) }
    static func proto(_ request: AccessoryRequest, sequence: UInt64 = 0) -> [UInt8] {
        codec.encode(Audioaccessory_V1_AccessoryTelemetry(request, sequence: sequence), as: .protobuf)
    }
    static func refused(_ reason: String) -> (String, (String, String)?) {
        ("accessory_bridge_messages_refused_total", ("reason", reason))
    }
    static func result(_ error: String) -> (String, (String, String)?) {
        ("accessory_bridge_results_total", ("error", error))
    }

    static let cases: [Case] = [
        // Payloads that are not the message
        Case(name: "truncated protobuf", topic: telemetry, payload: [0x08], error: .invalidRequest,
             message: "the data is truncated", counter: refused("protobuf")),
        Case(name: "a reserved wire type", topic: telemetry, payload: [0x0F], error: .invalidRequest,
             message: "not valid protobuf", counter: refused("protobuf")),
        Case(name: "a length beyond the end", topic: telemetry, payload: [0x12, 0x05, 0x61], error: .invalidRequest,
             message: "truncated", counter: refused("protobuf")),
        Case(name: "invalid UTF-8 in a string", topic: telemetry, payload: [0x12, 0x02, 0xC3, 0x28], error: .invalidRequest,
             message: "not valid UTF-8", counter: refused("protobuf")),
        Case(name: "oversized protobuf", topic: telemetry,
             payload: codec.encode(Audioaccessory_V1_AccessoryTelemetry.with {
                 $0.requestID = String(repeating: "x", count: 70_000)
                 $0.unpaired = .init()
             }, as: .protobuf), error: .invalidRequest, message: "the limit is 65536 bytes", counter: refused("too_large")),
        Case(name: "oversized JSON", topic: telemetry,
             payload: json(#"{"requestId": ""# + String(repeating: "x", count: 70_000) + #"", "unpaired": {}}"#),
             error: .invalidRequest, message: "the limit is 65536 bytes", counter: refused("too_large")),
        Case(name: "not JSON", topic: telemetry, payload: json("{sequence: 1"), error: .invalidRequest,
             message: "malformed JSON", counter: refused("json")),
        Case(name: "JSON with trailing text", topic: telemetry, payload: json(#"{"unpaired": {}} x"#), error: .invalidRequest,
             message: "extra text", counter: refused("json")),
        Case(name: "a JSON string for a number", topic: telemetry, payload: json(#"{"sequence": "many", "unpaired": {}}"#),
             error: .invalidRequest, message: "malformed", counter: refused("json")),
        Case(name: "a JSON array", topic: telemetry, payload: json("[1, 2]"), error: .invalidRequest,
             message: "malformed protobuf", counter: refused("protobuf")),
        Case(name: "two events at once", topic: telemetry, payload: json(#"{"unpaired": {}, "register": {}}"#),
             error: .invalidRequest, message: "more than one field of a oneof", counter: refused("json")),
        Case(name: "JSON said, protobuf sent", topic: telemetry, payload: proto(.unpaired), contentType: "application/json",
             error: .invalidRequest, message: "malformed JSON", counter: refused("json")),
        Case(name: "protobuf said, JSON sent", topic: telemetry, payload: json(#"{"unpaired": {}}"#),
             contentType: "application/protobuf", error: .invalidRequest, message: "malformed protobuf",
             counter: refused("protobuf")),
        Case(name: "an unsupported content type", topic: telemetry, payload: json(#"{"unpaired": {}}"#), contentType: "text/plain",
             error: .invalidRequest, message: "content type 'text/plain'", counter: refused("content_type")),
        // Values the schema allows and the contract does not
        Case(name: "an unknown enum name in JSON", topic: telemetry,
             payload: json(#"{"placement": {"placement": "PLACEMENT_SIDEWAYS"}}"#), error: .invalidRequest,
             message: "enum value name is not known", counter: refused("json")),
        Case(name: "an unknown enum name beside an unknown field", topic: telemetry,
             payload: json(#"{"later": 1, "placement": {"placement": "PLACEMENT_ONHEAD"}}"#), error: .invalidRequest,
             message: "enum value name is not known", counter: refused("json")),
        Case(name: "an unknown placement number", topic: telemetry,
             payload: codec.encode(Audioaccessory_V1_AccessoryTelemetry.with { $0.placement = .with { $0.placement = .UNRECOGNIZED(99) } }, as: .protobuf),
             error: .invalidRequest, message: "placement.placement is 99, which is not a known Placement", counter: refused("value")),
        // A capability a later version knows is kept (here the hardware lacks it); one beyond a set's 32 is refused.
        Case(name: "a capability number beyond 32", topic: telemetry,
             payload: codec.encode(Audioaccessory_V1_AccessoryTelemetry.with { $0.register = .with { $0.capabilities = [.UNRECOGNIZED(33)] } }, as: .protobuf),
             error: .invalidRequest, message: "register.capabilities holds 33, beyond the 32", counter: refused("value")),
        Case(name: "an UNSPECIFIED capability", topic: telemetry,
             payload: json(#"{"register": {"capabilities": ["CAPABILITY_UNSPECIFIED"]}}"#), error: .invalidRequest,
             message: "holds CAPABILITY_UNSPECIFIED", counter: refused("value")),
        Case(name: "no event", topic: telemetry, payload: json(#"{"requestId": "empty"}"#), error: .invalidRequest,
             message: "carries no event", counter: refused("value")),
        Case(name: "an empty payload", topic: telemetry, payload: [], error: .invalidRequest,
             message: "carries no event", counter: refused("value")),
        Case(name: "only fields of a newer schema", topic: telemetry, payload: [0xA2, 0x01, 0x00], error: .unknown,
             message: "fields this bridge does not know", counter: refused("value")),
        Case(name: "another accessory in the payload", topic: telemetry, payload: json(#"{"accessoryId": "earbuds", "unpaired": {}}"#),
             error: .invalidRequest, message: "the payload names accessory 'earbuds' but the topic names 'headphones'",
             counter: refused("value")),
        // AudioAccessoryKit's rules
        Case(name: "a 5-byte Bluetooth address", topic: telemetry,
             payload: proto(.sources(primary: Data([1, 2, 3, 4, 5]), secondary: nil)), error: .invalidRequest,
             message: "not 5 bytes", counter: result("invalidRequest")),
        Case(name: "a 7-byte Bluetooth address", topic: telemetry,
             payload: proto(.update(Configuration(deviceCapabilities: .all, primaryAudioSourceDeviceIdentifier: Data(repeating: 1, count: 7)))),
             error: .invalidRequest, message: "not 7 bytes", counter: result("invalidRequest")),
        Case(name: "the same address twice", topic: telemetry,
             payload: proto(.sources(primary: phone.data, secondary: phone.data)), error: .invalidRequest,
             message: "same address", counter: result("invalidRequest")),
        Case(name: "a secondary without a primary", topic: telemetry, payload: json(#"{"sources": {"secondary": "q83vASNF"}}"#),
             error: .invalidRequest, message: "needs a primary", counter: result("invalidRequest")),
        Case(name: "telemetry from a hub the accessory is not paired with", topic: "audio/hubs/hub-2/accessories/headphones/telemetry",
             payload: proto(.placement(.offHead)), error: .invalidRequest, message: "belongs to another hub",
             counter: result("invalidRequest")),
        Case(name: "capabilities changed by update", topic: telemetry,
             payload: proto(.update(Configuration(deviceCapabilities: .audioSwitching))), error: .invalidRequest,
             message: "register again to change them", counter: result("invalidRequest")),
        Case(name: "a placement without .placement", topic: "audio/hubs/hub-1/accessories/earbuds/telemetry",
             payload: proto(.placement(.inEar)), error: .accessoryNotCapable, message: "needs the .placement capability",
             counter: result("accessoryNotCapable")),
        Case(name: "a capability the hardware lacks", topic: "audio/hubs/hub-1/accessories/earbuds/telemetry",
             payload: proto(.register(.all)), error: .accessoryNotCapable, message: "cannot register [.placement, .audioSpatialization",
             counter: result("accessoryNotCapable")),
        Case(name: "a name over 256 bytes", topic: telemetry,
             payload: proto(.paired(name: String(repeating: "n", count: 300), model: "S", hardwareCapabilities: .all)),
             error: .invalidRequest, message: "the name is 300 bytes long", counter: result("invalidRequest")),
        Case(name: "an accessory never paired", topic: "audio/hubs/hub-1/accessories/ghost/telemetry",
             payload: proto(.register(.all)), error: .invalidRequest, message: "accessory ghost is not paired",
             counter: result("invalidRequest")),
        // Topics that break the grammar, and other inbound topics: no result is due, only a log line and a counter
        Case(name: "a hub id with a space", topic: "audio/hubs/hub 1/accessories/headphones/telemetry",
             payload: proto(.placement(.offHead)), error: nil, message: "", counter: refused("topic")),
        Case(name: "an accessory id too long", topic: "audio/hubs/hub-1/accessories/\(String(repeating: "a", count: 65))/telemetry",
             payload: proto(.placement(.offHead)), error: nil, message: "", counter: refused("topic")),
        Case(name: "an uppercase source id", topic: "audio/sources/123456789ABC/state",
             payload: json(#"{"activity": "ACTIVITY_IDLE"}"#), error: nil, message: "", counter: refused("topic")),
        Case(name: "an unknown activity", topic: "audio/sources/123456789abc/state",
             payload: codec.encode(Audioaccessory_V1_SourceState.with { $0.activity = .UNRECOGNIZED(9) }, as: .protobuf),
             error: nil, message: "", counter: refused("value")),
        Case(name: "a malformed source state", topic: "audio/sources/123456789abc/state", payload: [0x0F],
             error: nil, message: "", counter: refused("protobuf")),
        Case(name: "a malformed hub status", topic: "audio/hubs/hub-1/status", payload: json("{online: yes}"),
             error: nil, message: "", counter: refused("json")),
    ]

    @Test func everyBadInputIsRefusedClearlyAndChangesNothing() async throws {
        #expect(Self.cases.count >= 30)
        let broker = try await MosquittoBroker()
        let metrics = TestMetrics()
        let logs = LogRecorder()
        let bridge = try RunningBridge(broker: broker, metrics: metrics, logs: logs)
        let observer = try await Peer("observer", broker: broker, subscribe: ["audio/bridge/status"])
        _ = try await observer.waitFor(1, on: "audio/bridge/status")
        let hub = try await Peer("hub", broker: broker, subscribe: ["audio/hubs/#", "audio/accessories/#", "audio/sources/+/commands"])

        // Headphones on the phone, playing; earbuds registered without .placement and with switching-only hardware.
        try await BridgeIntegrationTests.setUpHeadphones(hub)
        // 4 to 9 never arrive: the placement is applied (and the hub asked for a rebirth).
        #expect(try await hub.request(.placement(.onHead), sequence: 10).error == .none)
        _ = try await hub.waitFor(1, on: "audio/hubs/hub-1/rebirth")
        try hub.report(.media, source: Self.phone)
        _ = try await hub.waitForCommands(1, for: Self.phone)
        #expect(try await hub.request(
            .paired(name: "Buds", model: "B", hardwareCapabilities: .audioSwitching), accessory: "earbuds").error == .none)
        #expect(try await hub.request(.register(.audioSwitching), accessory: "earbuds").error == .none)

        let stateTopics = ["audio/accessories/headphones/state", "audio/accessories/earbuds/state"]
        let commandsTopic = Topic.sourceCommands(source: Self.phone).name(under: .default)
        for testCase in Self.cases {
            let states = stateTopics.map { hub.messages(on: $0).count }
            let commands = hub.messages(on: commandsTopic).count
            let counter = testCase.counter
            let before = Self.count(metrics, counter)
            let logLines = logs.all.count
            // The result topic's count before publishing: read after, a fast answer would already be in it.
            let resultTopic = (try? Topic(parsing: testCase.topic, under: .default)).flatMap { topic in
                if case .telemetry(let hubID, let accessoryID) = topic {
                    Topic.result(hub: hubID, accessory: accessoryID).name(under: .default)
                } else {
                    nil
                }
            }
            let resultsBefore = resultTopic.map { hub.messages(on: $0).count } ?? 0

            try hub.client.publish(
                MQTTMessage(
                    topic: testCase.topic, payload: testCase.payload,
                    properties: MQTTProperties(contentType: testCase.contentType)))

            if let error = testCase.error, let resultTopic {
                let result = try await hub.waitFor(resultsBefore + 1, on: resultTopic)[resultsBefore]
                let format = try PayloadFormat.detect(contentType: result.properties.contentType, payload: result.payload)
                let decoded = try Self.codec.decode(Audioaccessory_V1_RequestResult.self, from: result.payload, format: format)
                #expect(decoded.error.code == error, "\(testCase.name): \(decoded.message)")
                #expect(decoded.message.contains(testCase.message), "\(testCase.name): \(decoded.message)")
            }
            // A marker on the same connection: the last good request again, a duplicate, which the bridge answers
            // with no state, command or rebirth. It handles messages in order, so once its answer is in, everything
            // the bad message did (counted, logged, published) is done and here.
            #expect(try await hub.request(.placement(.onHead), sequence: 10).duplicate, "\(testCase.name)")
            #expect(Self.count(metrics, counter) == before + 1, "\(testCase.name): \(counter)")
            #expect(
                logs.all.dropFirst(logLines).contains { $0.contains("mqtt.topic=\(testCase.topic)") },
                "\(testCase.name): a log line with the topic; got \(logs.all.dropFirst(logLines))")
            #expect(stateTopics.map { hub.messages(on: $0).count } == states, "\(testCase.name) changed a state")
            #expect(hub.messages(on: commandsTopic).count == commands, "\(testCase.name) caused a command")
            if let resultTopic, resultTopic != Self.resultTopic {
                #expect(hub.messages(on: resultTopic).count == resultsBefore + (testCase.error == nil ? 0 : 1),
                    "\(testCase.name): one answer")
            }
        }

        // Still healthy: taking the headphones off pauses the phone.
        #expect(try await hub.request(.placement(.offHead), sequence: 11).error == .none)
        let commands = try await hub.waitForCommands(2, for: Self.phone)
        #expect(commands.last?.action == .pause)
        await hub.close()
        await observer.close()
        try await bridge.stop()
    }

    static func count(_ metrics: TestMetrics, _ counter: (label: String, dimension: (String, String)?)) -> Int64 {
        if let dimension = counter.dimension {
            return metrics.counters(label: counter.label, dimensions: [dimension]).map(\.totalValue).reduce(0, +)
        }
        return metrics.counterTotal(label: counter.label)
    }

}
