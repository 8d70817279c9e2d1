import AccessoryBridge
import AccessoryModel
@testable import AccessoryWire
import Foundation
import MQTTClient
import Testing
import TestSupport

/// Rule 13 end to end, against a real mosquitto and the real bridge: the session's news reach the hub and the hosts
/// in order, follow the route, survive a killed bridge's restart unchanged, and the bridge never reads a frame.
@Suite struct HeadTrackingIntegrationTests {
    static let phone = BluetoothAddress("12:34:56:78:9A:BC")!
    static let laptop = BluetoothAddress("AB:CD:EF:01:23:45")!
    static let hubTopic = "audio/hubs/hub-1/accessories/headphones/headtracking"
    static func hostTopic(_ host: BluetoothAddress) -> String { Topic.hostHeadTracking(host: host).name(under: .default) }

    /// The news an observer of every session topic received, in the order the broker delivered them, decoded.
    static func news(_ peer: Peer, on topics: [String]) throws -> [(topic: String, event: HeadTrackingEvent)] {
        let wanted = Set(topics)
        return try peer.everything().filter { wanted.contains($0.topic) }.map {
            ($0.topic, try peer.codec.decode(HeadTrackingEvent.self, from: $0.payload, format: .protobuf).event)
        }
    }

    /// `bridge`, once it says online (it reads from then on).
    static func online(_ bridge: RunningBridge, _ broker: MosquittoBroker) async throws -> RunningBridge {
        let status = try await Peer("status", broker: broker, subscribe: ["audio/bridge/status"])
        _ = try await status.waitFor(1, on: "audio/bridge/status", timeout: .seconds(30))
        await status.close()
        return bridge
    }

    /// Pairs and registers head-tracking headphones listing the phone and the laptop; the phone plays media with head
    /// tracking on.
    static func setUp(_ hub: Peer) async throws {
        try await hub.request(.paired(name: "Studio", model: "S", hardwareCapabilities: .all), sequence: 1)
        try await hub.request(.register(.all), sequence: 2)
        try await hub.request(.sources(primary: phone.data, secondary: laptop.data), sequence: 3)
        try hub.report(.media, source: phone, headTracking: true)
    }

    @Test func theSessionFollowsTheRouteTheOldHostsEndsFirst() async throws {
        let broker = try await MosquittoBroker()
        let bridge = try await Self.online(RunningBridge(broker: broker), broker)
        let topics = [Self.hubTopic, Self.hostTopic(Self.phone), Self.hostTopic(Self.laptop)]
        let hub = try await Peer("hub", broker: broker, subscribe: ["audio/hubs/hub-1/accessories/+/result"])
        let observer = try await Peer("observer", broker: broker, subscribe: topics)
        try await Self.setUp(hub)

        // Put on: the phone is routed and hosts the session; the hub and the phone hear of it.
        try await hub.request(.placement(.onHead), sequence: 4)
        _ = try await observer.waitFor(1, on: Self.hubTopic)
        var news = try Self.news(observer, on: topics)
        #expect(news.map(\.topic) == [Self.hostTopic(Self.phone), Self.hubTopic], "the host hears first")
        let first = news[0].event
        #expect(first.kind == .activated && first.reason == .routed && first.session.host == Self.phone)
        #expect(first.session.isHeadTrackingActive, "the phone said head tracking is on")
        #expect(news[1].event == first, "the same news to the host")

        // A call on the laptop takes the headphones: the phone's session ends before the laptop's begins.
        try hub.report(.call, source: Self.laptop, headTracking: true)
        _ = try await observer.waitFor(3, on: Self.hubTopic)
        news = Array(try Self.news(observer, on: topics).dropFirst(2))
        #expect(news.map(\.topic) == [Self.hostTopic(Self.phone), Self.hubTopic, Self.hostTopic(Self.laptop), Self.hubTopic])
        #expect(news.map(\.event.kind) == [.invalidated, .invalidated, .activated, .activated])
        #expect(news[0].event.session.id == first.session.id && news[0].event.reason == .routeMoved)
        #expect(news[2].event.session.host == Self.laptop && news[2].event.session.id != first.session.id)
        #expect(news[2].event.session.order > news[0].event.session.order, "fenced: every news after the last")

        // The laptop's setting goes off: its session's state changes; taken off: it ends.
        try hub.report(.call, source: Self.laptop, headTracking: false)
        _ = try await observer.waitFor(2, on: Self.hostTopic(Self.laptop))
        try await hub.request(.placement(.offHead), sequence: 5)
        _ = try await observer.waitFor(3, on: Self.hostTopic(Self.laptop))
        let laptop = try observer.messages(on: Self.hostTopic(Self.laptop)).map {
            try observer.codec.decode(HeadTrackingEvent.self, from: $0.payload, format: .protobuf).event
        }
        #expect(laptop.map(\.kind) == [.activated, .stateChanged, .invalidated])
        #expect(laptop[1].reason == .switchChanged && !laptop[1].session.isHeadTrackingActive)
        #expect(laptop[2].reason == .takenOff)
        try await bridge.stop()
    }

    @Test func aKilledBridgeRestartedKeepsTheSessionAndItsId() async throws {
        let broker = try await MosquittoBroker()
        let status = try await Peer("status", broker: broker, subscribe: ["audio/bridge/status"])
        var bridge = try ReliabilityTests.bridgeProcess(broker, clientID: "ht-bridge", log: "bridge-1.log")
        _ = try await status.waitFor(1, on: "audio/bridge/status", timeout: .seconds(30))
        let hub = try await Peer("hub", broker: broker, subscribe: ["audio/hubs/hub-1/accessories/+/result", Self.hubTopic])
        try await Self.setUp(hub)
        try await hub.request(.placement(.onHead), sequence: 4)
        let activated = try HeadTrackingEvent.decode(try await hub.waitFor(1, on: Self.hubTopic)[0])

        bridge.signal(SIGKILL)
        _ = try await bridge.exit()
        bridge = try ReliabilityTests.bridgeProcess(broker, clientID: "ht-bridge", log: "bridge-2.log")
        // Online, offline (the killed one's will), online.
        _ = try await status.waitFor(3, on: "audio/bridge/status", timeout: .seconds(30))
        // The restarted bridge has the accessory as it was: its state (a duplicate's answer) names the same session.
        let again = try await hub.request(.placement(.onHead), sequence: 4)
        #expect(again.duplicate)
        #expect(again.state.headTracking.sessionID == Data(activated.session.id.bytes), "taken over, not renewed")
        // Taken off: the session that ends is the same one, and nothing came between.
        try await hub.request(.placement(.offHead), sequence: 5)
        let after = try await hub.waitFor(2, on: Self.hubTopic).map(HeadTrackingEvent.decode)
        #expect(after.map(\.kind) == [.activated, .invalidated], "no news of a new session between")
        #expect(after[1].session.id == activated.session.id && after[1].reason == .takenOff)
        #expect(after[1].session.order > activated.session.order)
        bridge.signal(SIGTERM)
        _ = try await bridge.exit()
    }

    @Test func theBridgeNeverReadsAFrame() async throws {
        // What a single bridge and a cluster's slot subscribe to: no filter matches a frame topic.
        let frame = Topic.frames(host: Self.phone, hub: HubID("hub-1")!, accessory: AccessoryID("headphones")!)
        for root in [TopicRoot.default, TopicRoot("audio/slots/3")!] {
            for filter in AccessoryBridgeService.subscriptionFilters(
                under: root, slot: root != .default, homeAssistantPrefix: "homeassistant")
            {
                #expect(!MQTTTopicFilter(filter).matches(frame.name(under: .default)), "\(filter)")
                #expect(!MQTTTopicFilter(filter).matches(frame.name(under: root)), "\(filter)")
            }
        }
        // And a frame published to a real bridge meets nothing: what it logs of every message it reads says so.
        let broker = try await MosquittoBroker()
        let logs = LogRecorder()
        let bridge = try await Self.online(RunningBridge(broker: broker, logs: logs), broker)
        let hub = try await Peer("hub", broker: broker, subscribe: ["audio/hubs/hub-1/accessories/+/result"])
        try hub.client.publish(MQTTMessage(topic: frame.name(under: .default), payload: [0x0A, 0x10], qos: .atMostOnce))
        // Something the bridge does after it read anything published before: answer this request.
        try await hub.request(.paired(name: "Studio", model: "S", hardwareCapabilities: .all), sequence: 1)
        #expect(logs.all.contains { $0.contains("received") || $0.contains("connected") }, "the log is read")
        #expect(!logs.all.contains { $0.contains("frames") }, "the bridge received a frame")
        try await bridge.stop()
    }
}

extension HeadTrackingEvent {
    /// A session's news as the bridge publishes it (protobuf).
    static func decode(_ message: MQTTMessage) throws -> HeadTrackingEvent {
        try WireCodec().decode(HeadTrackingEvent.self, from: message.payload, format: .protobuf).event
    }
}
