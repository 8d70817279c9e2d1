@testable import AccessoryBridge
import AccessoryModel
@testable import HomeAutomation
@testable import AccessoryWire
import Foundation
import Logging
import MQTTClient
import MetricsTestKit
import Testing

/// What home automation reads and writes, without a broker: views, events, availability, the person's controls, and
/// Home Assistant discovery. (HomeAutomationIntegrationTests run the same through a real mosquitto.)
@Suite struct HomeAutomationTests {
    typealias Recorder = MessageProcessorTests.Recorder
    let recorder = Recorder()
    let clock = MessageProcessorTests.TestClock()
    let metrics = TestMetrics()
    let processor: MessageProcessor
    let codec = WireCodec()
    static let phone = MessageProcessorTests.phone
    static let laptop = BluetoothAddress("AB:CD:EF:01:23:45")!

    init() {
        processor = MessageProcessor(
            configuration: BridgeConfiguration(mqtt: MQTTConfiguration(clientID: "test")), instanceID: "t",
            publisher: recorder, clock: clock.wallClock, logger: Logger(label: "test"), metrics: metrics)
    }

    // MARK: - Helpers

    func telemetry(_ request: AccessoryRequest, sequence: UInt64, accessory: String = "headphones", hub: String = "hub-1") {
        let message = Audioaccessory_V1_AccessoryTelemetry(request, sequence: sequence, requestID: "r\(sequence)")
        send("audio/hubs/\(hub)/accessories/\(accessory)/telemetry", codec.encode(message, as: .protobuf))
    }

    func send(_ topic: String, _ text: String, retain: Bool = false) {
        send(topic, Array(text.utf8), retain: retain)
    }

    func send(_ topic: String, _ payload: [UInt8], retain: Bool = false) {
        processor.handle(MQTTMessage(topic: topic, payload: payload, retain: retain))
    }

    func source(_ address: BluetoothAddress, _ activity: Activity, headTracking: Bool = false) {
        let state = Audioaccessory_V1_SourceState(SourceReport(activity: activity, headTracking: headTracking))
        send("audio/sources/\(address.topicID)/state", codec.encode(state, as: .protobuf))
    }

    /// Pairs and registers the headphones, connected to the phone and the laptop; returns what was published.
    @discardableResult
    func setUpHeadphones() -> [MQTTMessage] {
        telemetry(.paired(name: "Studio \"Pro\"", model: "S-2", hardwareCapabilities: .all), sequence: 1)
        telemetry(.register([.audioSwitching, .placement]), sequence: 2)
        telemetry(.sources(primary: Self.phone.data, secondary: Self.laptop.data), sequence: 3)
        return recorder.take()
    }

    /// Runs the network loop's turns that announce the accessories, a slice each, until none is due.
    static func announce(_ processor: MessageProcessor) {
        while processor.timeUntilWake() == .zero { processor.wake() }
    }

    static func json(_ message: MQTTMessage) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(message.payload)) as? [String: Any], "\(message.topic)")
    }

    static func last(_ topic: String, in messages: [MQTTMessage]) throws -> MQTTMessage {
        try #require(messages.last { $0.topic == topic }, "nothing on \(topic) in \(messages.map(\.topic))")
    }

    static let view = "audio/accessories/headphones/view"
    static let config = "homeassistant/device/aab_audio_headphones/config"

    // MARK: - Views

    @Test func theViewIsReadableRetainedJSON() throws {
        let published = setUpHeadphones()
        let message = try Self.last(Self.view, in: published)
        #expect(message.retain)
        #expect(message.qos == .atLeastOnce)
        #expect(message.properties.contentType == "application/json")
        let view = try Self.json(message)
        #expect(view["accessory"] as? String == "headphones")
        #expect(view["name"] as? String == "Studio \"Pro\"", "escaped and read back")
        #expect(view["registration"] as? String == "registered")
        #expect(view["worn"] as? String == "OFF", "it reports placement, and has not yet (rule 2)")
        #expect(view["placement"] as? String == "unknown")
        #expect(view["sources"] as? [String] == ["12:34:56:78:9A:BC", "AB:CD:EF:01:23:45"])
        #expect(view["routed_source"] as? String == "none")
        #expect(view["automatic_switching"] as? String == "ON")
        #expect(view["pinned_source"] as? String == "automatic")
        #expect(view["problem"] as? String == "OFF")

        source(Self.phone, .media)
        telemetry(.placement(.onHead), sequence: 4)
        let placed = try Self.json(Self.last(Self.view, in: recorder.take()))
        #expect(placed["placement"] as? String == "on_head")
        #expect(placed["routed_source"] as? String == "12:34:56:78:9A:BC")
    }

    /// A full queue that refuses the view and the config but not the state: both go out once it drains, with the
    /// state again.
    @Test func aViewOrConfigTheQueueRefusedGoesOutOnceItDrains() throws {
        recorder.refusedTopics.withLock { $0 = [Self.view, Self.config] }
        let published = setUpHeadphones()
        #expect(published.contains { $0.topic == "audio/accessories/headphones/state" })
        #expect(!published.contains { $0.topic == Self.view || $0.topic == Self.config })
        recorder.refusedTopics.withLock { $0 = [] }
        processor.event(.queueDrained)
        let again = recorder.take()
        #expect(try Self.json(Self.last(Self.view, in: again))["sources"] as? [String] == [
            "12:34:56:78:9A:BC", "AB:CD:EF:01:23:45",
        ])
        #expect(try Self.json(Self.last(Self.config, in: again))["dev"] != nil)
        #expect(again.contains { $0.topic == "audio/accessories/headphones/state" })
    }

    @Test func everyCommandIsAnEventNeverRetained() throws {
        setUpHeadphones()
        source(Self.phone, .media)
        telemetry(.placement(.onHead), sequence: 4)
        telemetry(.placement(.offHead), sequence: 5)
        let events = recorder.take().filter { $0.topic == "audio/accessories/headphones/events" }
        #expect(events.allSatisfy { !$0.retain })
        let decoded = try events.map(Self.json)
        #expect(decoded.map { $0["event_type"] as? String } == ["route_to_accessory", "pause"])
        #expect(decoded.map { $0["reason"] as? String } == ["put_on", "taken_off"])
        #expect(decoded.allSatisfy { $0["source"] as? String == "12:34:56:78:9A:BC" })
    }

    @Test func headTrackingIsShownWithItsHostAndItsNewsAreEvents() throws {
        telemetry(.paired(name: "Studio", model: "S-2", hardwareCapabilities: .all), sequence: 1)
        telemetry(.register(.all), sequence: 2)
        telemetry(.sources(primary: Self.phone.data, secondary: nil), sequence: 3)
        source(Self.phone, .media, headTracking: true)
        let before = recorder.take()
        // The accessory's device has the head-tracking entities, since its hardware tracks heads.
        let config = try Self.json(Self.last(Self.config, in: before))
        let components = try #require(config["cmps"] as? [String: Any])
        let sensor = try #require(components["head_tracking"] as? [String: Any])
        #expect(sensor["p"] as? String == "binary_sensor" && sensor["value_template"] as? String == "{{ value_json.head_tracking }}")
        let event = try #require(components["head_tracking_event"] as? [String: Any])
        #expect(event["event_types"] as? [String] == ["head_tracking_activated", "head_tracking_state_changed", "head_tracking_invalidated"])
        // Both event entities read the accessory's events topic: each renders the other's events empty, which Home
        // Assistant ignores (an event type not in an entity's list is a warning in its log).
        #expect(event["value_template"] as? String
            == "{{ value if value_json.event_type.startswith('head_tracking_') else '' }}")
        let switchEvent = try #require(components["switch_event"] as? [String: Any])
        #expect(switchEvent["value_template"] as? String
            == "{{ '' if value_json.event_type.startswith('head_tracking_') else value }}")
        #expect(try Self.json(Self.last(Self.view, in: before))["head_tracking"] as? String == "OFF")

        telemetry(.placement(.onHead), sequence: 4)
        let on = recorder.take()
        let view = try Self.json(Self.last(Self.view, in: on))
        #expect(view["head_tracking"] as? String == "ON")
        #expect(view["head_tracking_host"] as? String == "12:34:56:78:9A:BC")
        // The person turns head tracking off on the phone: the view says so, with the session still there.
        source(Self.phone, .media, headTracking: false)
        let off = recorder.take()
        let switchedOff = try Self.json(Self.last(Self.view, in: off))
        #expect(switchedOff["head_tracking"] as? String == "OFF")
        #expect(switchedOff["head_tracking_host"] as? String == "12:34:56:78:9A:BC")
        telemetry(.placement(.offHead), sequence: 5)
        let events = try (on + off + recorder.take()).filter { $0.topic == "audio/accessories/headphones/events" }
            .map(Self.json)
        #expect(events.compactMap { $0["event_type"] as? String }.filter { $0.hasPrefix("head_tracking") }
            == ["head_tracking_activated", "head_tracking_state_changed", "head_tracking_invalidated"])
        #expect(events.last?["reason"] as? String == "taken_off")
    }

    @Test func aHubsStatusIsItsAvailability() throws {
        send("audio/hubs/hub-1/status", codec.encode(HubStatus(online: true, since: Timestamp(unixMilliseconds: 0)), as: .protobuf))
        var message = try Self.last("audio/hubs/hub-1/availability", in: recorder.take())
        #expect(message.payload == Array("online".utf8) && message.retain)
        send("audio/hubs/hub-1/status", [])
        message = try Self.last("audio/hubs/hub-1/availability", in: recorder.take())
        #expect(message.payload == Array("offline".utf8))
    }

    // MARK: - Controls

    @Test func controlsInJSONAreAppliedAnsweredAndShown() throws {
        setUpHeadphones()
        source(Self.phone, .media)
        source(Self.laptop, .media)
        telemetry(.placement(.onHead), sequence: 4)
        _ = recorder.take()

        // What Home Assistant's select sends: pin the laptop.
        send("audio/accessories/headphones/controls", #"{"pinnedSource":"AB:CD:EF:01:23:45","requestId":"ha-1"}"#)
        let published = recorder.take()
        let result = try Self.last("audio/accessories/headphones/controls/result", in: published)
        #expect(result.properties.contentType == "application/json", "answered in the format it was asked")
        let decoded = try codec.decode(Audioaccessory_V1_RequestResult.self, from: result.payload, format: .json)
        #expect(decoded.error == .none)
        #expect(decoded.requestID == "ha-1")
        #expect(decoded.state.pinnedSource == Self.laptop.data)
        let commands = try published.filter { $0.topic.hasSuffix("/commands") }.map {
            try codec.decode(Audioaccessory_V1_SwitchCommand.self, from: $0.payload, format: .protobuf)
        }
        #expect(commands.map(\.action) == [.pause, .routeToAccessory])
        #expect(commands.allSatisfy { $0.reason == .controlsChanged })
        let view = try Self.json(Self.last(Self.view, in: published))
        #expect(view["pinned_source"] as? String == "AB:CD:EF:01:23:45")
        #expect(view["routed_source"] as? String == "AB:CD:EF:01:23:45")

        // What Home Assistant's switch sends: automatic switching off. The state keeps it.
        send("audio/accessories/headphones/controls", #"{"switching":"SWITCHING_OFF"}"#)
        let off = recorder.take()
        #expect(off.filter { $0.topic.hasSuffix("/commands") }.isEmpty, "nothing is switched on the way out")
        let stateMessage = try Self.last("audio/accessories/headphones/state", in: off)
        #expect(stateMessage.properties.contentType == "application/json", "in the format of the request")
        let state = try codec.decode(Audioaccessory_V1_AccessoryState.self, from: stateMessage.payload, format: .json)
        #expect(state.automaticSwitchingOff)
        #expect(try Self.json(Self.last(Self.view, in: off))["automatic_switching"] as? String == "OFF")
    }

    @Test(arguments: [
        (#"{"pinnedSource":"my phone"}"#, "must be \"automatic\" or a Bluetooth address", "value"),
        (#"{"switching":"SWITCHING_SOMETIMES"}"#, "malformed JSON", "json"),
        ("{", "malformed JSON", "json"),
    ])
    func badControlsGetAClearAnswerAndChangeNothing(_ payload: String, _ reason: String, _ counted: String) throws {
        setUpHeadphones()
        send("audio/accessories/headphones/controls", payload)
        let published = recorder.take()
        #expect(published.map(\.topic) == ["audio/accessories/headphones/controls/result"])
        let result = try codec.decode(
            Audioaccessory_V1_RequestResult.self, from: published[0].payload, format: .json)
        #expect(result.error == .invalidRequest)
        #expect(result.message.contains(reason), "\(result.message)")
        #expect(try metrics.expectCounter("accessory_bridge_messages_refused_total", [("reason", counted)])
            .totalValue == 1)
    }

    @Test func controlsOfAnAccessoryThatIsNotPairedAreRefused() throws {
        send("audio/accessories/ghost/controls", #"{"switching":"SWITCHING_OFF"}"#)
        let published = recorder.take()
        #expect(published.map(\.topic) == ["audio/accessories/ghost/controls/result"])
        let result = try codec.decode(Audioaccessory_V1_RequestResult.self, from: published[0].payload, format: .json)
        #expect(result.error == .invalidRequest)
        #expect(result.message.contains("not paired"))
    }

    // MARK: - Home Assistant discovery

    @Test func configsAreWrittenAsStableCompactJSON() {
        let document: [String: Any] = [
            "qos": 1, "retain": true, "name": "Studio \"Pro\"\n", "ids": ["a", "b"],
            "cmps": ["z": ["p": "switch"], "a": [:] as [String: Any]], "list": [["topic": "t/1"]], "empty": [] as [Any],
        ]
        let bytes = JSONObjectWriter.document(document)
        #expect(String(decoding: bytes, as: UTF8.self) == #"{"cmps":{"a":{},"z":{"p":"switch"}},"empty":[],"ids":["a","b"],"list":[{"topic":"t/1"}],"name":"Studio \"Pro\"\u000a","qos":1,"retain":true}"#)
        #expect(JSONObjectWriter.document(document) == bytes, "the same document, the same bytes")
    }

    @Test func discoveryDescribesTheAccessoryAsOneDevice() throws {
        let published = setUpHeadphones()
        let message = try Self.last(Self.config, in: published)
        #expect(message.retain)
        let config = try Self.json(message)
        let device = try #require(config["dev"] as? [String: Any])
        #expect(device["ids"] as? [String] == ["aab_audio_headphones"])
        #expect(device["name"] as? String == "Studio \"Pro\"")
        #expect(device["via_device"] as? String == "aab_audio_hub_hub-1")
        #expect((config["o"] as? [String: Any])?["name"] as? String == "AudioAccessoryBridge")
        #expect(config["state_topic"] as? String == Self.view)
        #expect(config["availability_mode"] as? String == "all")
        let availability = try #require(config["availability"] as? [[String: Any]])
        #expect(availability.compactMap { $0["topic"] as? String } == [
            "audio/bridge/availability", "audio/hubs/hub-1/availability",
        ])
        let components = try #require(config["cmps"] as? [String: [String: Any]])
        for (name, component) in components {
            // Home Assistant drops the whole device when one component lacks these, and does not inherit `qos`.
            #expect(component["p"] is String, "\(name)")
            #expect(component["unique_id"] as? String == "aab_audio_headphones_\(name)")
            #expect(component["qos"] as? Int == 1, "\(name)")
        }
        #expect(components["worn"]?["p"] as? String == "binary_sensor")
        #expect(components["placement"]?["options"] as? [String] == HomeAutomationJSON.placements)
        #expect(components["automatic_switching"]?["command_topic"] as? String
            == "audio/accessories/headphones/controls")
        #expect(components["pinned_source"]?["options"] as? [String] == [
            "automatic", "12:34:56:78:9A:BC", "AB:CD:EF:01:23:45",
        ])
        #expect(components["switch_event"]?["event_types"] as? [String] == [
            "route_to_accessory", "pause", "resume", "release",
        ])
        #expect(components.keys.filter { $0.hasPrefix("trigger_") }.count == 4)
        // The hub's device, once.
        #expect(published.filter { $0.topic == "homeassistant/device/aab_audio_hub_hub-1/config" }.count == 1)
    }

    @Test func discoveryIsPublishedOnlyWhenWhatItShowsChanges() throws {
        setUpHeadphones()
        telemetry(.placement(.onHead), sequence: 4)
        telemetry(.placement(.offHead), sequence: 5)
        #expect(!recorder.take().contains { $0.topic.hasPrefix("homeassistant/") }, "placement is state, not config")
        // A new source changes the pinned-source options.
        telemetry(.sources(primary: Self.phone.data, secondary: nil), sequence: 6)
        let config = try Self.json(Self.last(Self.config, in: recorder.take()))
        let components = try #require(config["cmps"] as? [String: [String: Any]])
        #expect(components["pinned_source"]?["options"] as? [String] == ["automatic", "12:34:56:78:9A:BC"])
    }

    @Test func unpairingRemovesTheDeviceAndItsView() throws {
        setUpHeadphones()
        telemetry(.unpaired, sequence: 4)
        let published = recorder.take()
        #expect(try Self.last(Self.config, in: published).payload.isEmpty)
        #expect(try Self.last(Self.view, in: published).payload.isEmpty)
        #expect(try Self.last(Self.view, in: published).retain)
    }

    @Test func homeAssistantComingOnlineGetsEveryDeviceAgain() throws {
        setUpHeadphones()
        send("homeassistant/status", "online")
        Self.announce(processor)
        let topics = Set(recorder.take().map(\.topic).filter { $0.hasPrefix("homeassistant/") })
        #expect(topics == [
            Self.config, "homeassistant/device/aab_audio_hub_hub-1/config", "homeassistant/device/aab_audio_bridge/config",
        ])
        send("homeassistant/status", "offline")
        #expect(recorder.take().isEmpty)
    }

    /// Home Assistant comes back while the queue refuses the headphones' config: it goes out once the queue drains,
    /// though the headphones did not change.
    @Test func aConfigRefusedWhenHomeAssistantCameBackGoesOutOnceTheQueueDrains() throws {
        setUpHeadphones()
        recorder.refusedTopics.withLock { $0 = [Self.config] }
        send("homeassistant/status", "online")
        Self.announce(processor)
        #expect(!recorder.take().contains { $0.topic == Self.config })
        recorder.refusedTopics.withLock { $0 = [] }
        processor.event(.queueDrained)
        let again = recorder.take()
        #expect(try Self.json(Self.last(Self.config, in: again))["dev"] != nil)
        // Once: a second drain has nothing left to announce.
        processor.event(.queueDrained)
        #expect(!recorder.take().contains { $0.topic == Self.config })
    }

    @Test func atStartUpOnlyChangedConfigsArePublishedAndThoseOfGoneAccessoriesRemoved() throws {
        // A first bridge: the headphones' state and configs, as the broker would retain them.
        var first = setUpHeadphones()
        processor.event(.connected(sessionPresent: false))
        Self.announce(processor)
        first += recorder.take()
        var retained: [String: MQTTMessage] = [:]
        for message in first where message.retain { retained[message.topic] = message }
        retained["audio/accessories/headphones/view"] = nil
        retained["audio/bridge/view"] = nil  // home automation's, which the bridge does not read back
        // A config of an accessory that no longer exists, and another integration's device.
        retained["homeassistant/device/aab_audio_gone/config"] = MQTTMessage(
            topic: "homeassistant/device/aab_audio_gone/config", payload: Array("{}".utf8), retain: true)
        retained["homeassistant/device/zigbee_lamp/config"] = MQTTMessage(
            topic: "homeassistant/device/zigbee_lamp/config", payload: Array("{}".utf8), retain: true)

        let restarted = Recorder()
        let processor = MessageProcessor(
            configuration: BridgeConfiguration(mqtt: MQTTConfiguration(clientID: "test")), instanceID: "t2",
            publisher: restarted, clock: clock.wallClock, logger: Logger(label: "test"), metrics: TestMetrics())
        for message in retained.values { processor.restore(message) }
        let restored = processor.restoringFinished()
        #expect(restored.accessories == 1)
        #expect(restored.skipped == 1, "the other integration's config is not the bridge's")
        processor.event(.connected(sessionPresent: false))
        Self.announce(processor)
        let published = restarted.take().filter { $0.topic.hasPrefix("homeassistant/") }
        #expect(published.map(\.topic) == ["homeassistant/device/aab_audio_gone/config"], "\(published.map(\.topic))")
        #expect(published.first?.payload.isEmpty == true)
        // A reconnection announces nothing again.
        processor.event(.connected(sessionPresent: true))
        #expect(!restarted.take().contains { $0.topic.hasPrefix("homeassistant/") })
    }

    /// At start-up the queue refuses the bridge's own config, a hub's and the removal of a stale config: each goes
    /// out once it drains, and once only. A stale config that became an accessory's meanwhile is not removed.
    @Test func whatTheQueueRefusedAtStartUpGoesOutOnceItDrains() throws {
        let bridge = "homeassistant/device/aab_audio_bridge/config"
        let hub = "homeassistant/device/aab_audio_hub_hub-2/config"
        let gone = "homeassistant/device/aab_audio_gone/config"
        let back = "homeassistant/device/aab_audio_back/config"
        for topic in [gone, back] {
            processor.restore(MQTTMessage(topic: topic, payload: Array("{}".utf8), retain: true))
        }
        _ = processor.restoringFinished()
        // The queue refuses from the start: the hub's config, announced when its status comes (here before the first
        // connection is complete), and what the first connection's announcement sends.
        recorder.refusedTopics.withLock { $0 = [bridge, hub, gone, back] }
        send("audio/hubs/hub-2/status", codec.encode(HubStatus(online: true, since: Timestamp(unixMilliseconds: 0)), as: .protobuf))
        _ = recorder.take()
        processor.event(.connected(sessionPresent: false))
        Self.announce(processor)
        #expect(!recorder.take().contains { [bridge, hub, gone, back].contains($0.topic) })

        recorder.refusedTopics.withLock { $0 = [] }
        // Before the queue drains, "back" is paired again (its config goes out: its removal is moot).
        telemetry(.paired(name: "Back", model: "B", hardwareCapabilities: .all), sequence: 1, accessory: "back")
        #expect(try Self.json(Self.last(back, in: recorder.take()))["dev"] != nil)
        processor.event(.queueDrained)
        let drained = recorder.take().filter { $0.topic.hasPrefix("homeassistant/") }
        #expect(Set(drained.map(\.topic)) == [bridge, hub, gone], "\(drained.map(\.topic))")
        #expect(try Self.json(Self.last(bridge, in: drained))["dev"] != nil)
        #expect(try Self.json(Self.last(hub, in: drained))["dev"] != nil)
        #expect(try Self.last(gone, in: drained).payload.isEmpty)
        #expect(try Self.last(gone, in: drained).retain)
        processor.event(.queueDrained)
        #expect(!recorder.take().contains { $0.topic.hasPrefix("homeassistant/") }, "nothing is due twice")
    }

    @Test func withoutHomeAssistantTheViewsStayAndDiscoveryGoes() throws {
        var configuration = BridgeConfiguration(mqtt: MQTTConfiguration(clientID: "test"))
        configuration.homeAssistantPrefix = nil
        let recorder = Recorder()
        let processor = MessageProcessor(
            configuration: configuration, instanceID: "t", publisher: recorder, clock: clock.wallClock,
            logger: Logger(label: "test"), metrics: TestMetrics())
        let telemetry = Audioaccessory_V1_AccessoryTelemetry(
            .paired(name: "A", model: "M", hardwareCapabilities: .all), sequence: 1, requestID: "r")
        processor.handle(MQTTMessage(
            topic: "audio/hubs/hub-1/accessories/headphones/telemetry", payload: codec.encode(telemetry, as: .protobuf)))
        let topics = recorder.take().map(\.topic)
        #expect(topics.contains(Self.view))
        #expect(!topics.contains { $0.hasPrefix("homeassistant/") })
    }

    @Test func theIDsAreHomeAssistantsGrammar() throws {
        let discovery = HomeAssistantDiscovery(prefix: "homeassistant", root: try #require(TopicRoot("site 7/äudio")))
        #expect(discovery.bridgeID == "aab_site_7___udio_bridge")
        #expect(discovery.bridgeID.utf8.allSatisfy(IdentifierGrammar.isAllowed))
    }
}
