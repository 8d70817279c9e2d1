import AccessoryModel
@testable import AccessoryWire
import Testing

@Suite struct TopicTests {
    static let hub = HubID("hub-1")!
    static let accessory = AccessoryID("Headphones_2")!
    static let source = BluetoothAddress("12:34:56:78:9A:BC")!

    static let topics: [(Topic, String)] = [
        (.telemetry(hub: hub, accessory: accessory), "audio/hubs/hub-1/accessories/Headphones_2/telemetry"),
        (.result(hub: hub, accessory: accessory), "audio/hubs/hub-1/accessories/Headphones_2/result"),
        (.hubStatus(hub: hub), "audio/hubs/hub-1/status"),
        (.rebirth(hub: hub), "audio/hubs/hub-1/rebirth"),
        (.responses(hub: hub, name: "7f3a"), "audio/hubs/hub-1/responses/7f3a"),
        (.responses(hub: hub, name: "app/session-2/x"), "audio/hubs/hub-1/responses/app/session-2/x"),
        (.accessoryState(accessory: accessory), "audio/accessories/Headphones_2/state"),
        (.sourceState(source: source), "audio/sources/123456789abc/state"),
        (.sourceCommands(source: source), "audio/sources/123456789abc/commands"),
        (.bridgeStatus, "audio/bridge/status"),
        (.bridgeLayout, "audio/bridge/layout"),
        (.controls(accessory: accessory), "audio/accessories/Headphones_2/controls"),
        (.controlsResult(accessory: accessory), "audio/accessories/Headphones_2/controls/result"),
        (.accessoryView(accessory: accessory), "audio/accessories/Headphones_2/view"),
        (.accessoryEvents(accessory: accessory), "audio/accessories/Headphones_2/events"),
        (.hubAvailability(hub: hub), "audio/hubs/hub-1/availability"),
        (.bridgeAvailability, "audio/bridge/availability"),
        (.bridgeView, "audio/bridge/view"),
        (.headTracking(hub: hub, accessory: accessory), "audio/hubs/hub-1/accessories/Headphones_2/headtracking"),
        (.hostHeadTracking(host: source), "audio/sources/123456789abc/headtracking"),
        (.frames(host: source, hub: hub, accessory: accessory), "audio/sources/123456789abc/frames/hub-1/Headphones_2"),
    ]

    @Test(arguments: topics)
    func buildsAndParsesEveryTopic(_ topic: Topic, _ name: String) throws {
        #expect(topic.name(under: .default) == name)
        #expect(try Topic(parsing: name, under: .default) == topic)

        let root = try #require(TopicRoot("site-7/audio"))
        let rooted = topic.name(under: root)
        #expect(rooted == "site-7/" + name)
        #expect(try Topic(parsing: rooted, under: root) == topic)
    }

    @Test func everyKindHasItsFilter() {
        let filters = Topic.Kind.allCases.map { $0.filter(under: .default) }
        #expect(filters == [
            "audio/hubs/+/accessories/+/telemetry", "audio/hubs/+/accessories/+/result", "audio/hubs/+/status",
            "audio/hubs/+/rebirth", "audio/hubs/+/responses/#", "audio/accessories/+/state", "audio/sources/+/state",
            "audio/sources/+/commands", "audio/bridge/status", "audio/accessories/+/controls",
            "audio/accessories/+/controls/result", "audio/accessories/+/view", "audio/accessories/+/events",
            "audio/hubs/+/availability", "audio/bridge/availability", "audio/bridge/view", "audio/bridge/layout",
            "audio/hubs/+/accessories/+/headtracking", "audio/sources/+/headtracking", "audio/sources/+/frames/+/+",
        ])
        for (topic, _) in Self.topics {
            #expect(Topic.Kind.allCases.contains(topic.kind))
        }
    }

    static let malformed: [(String, String)] = [
        ("other/hubs/hub-1/status", "not under the topic root 'audio'"),
        ("audio", "not under the topic root"),
        ("audio/", "not a topic of the contract"),
        ("audiox/hubs/hub-1/status", "not under the topic root"),
        ("audio/hubs/hub-1", "not a topic of the contract"),
        ("audio/hubs/hub-1/status/extra", "not a topic of the contract"),
        ("audio/hubs//status", "hub id '' must be 1–64 characters"),
        ("audio/hubs/hub 1/status", "hub id 'hub 1' must be"),
        ("audio/hubs/+/status", "hub id '+' must be"),
        ("audio/hubs/hub-1/accessories/" + String(repeating: "a", count: 65) + "/telemetry", "accessory id 'aaaa"),
        ("audio/hubs/hub-1/accessories/héad/telemetry", "accessory id 'héad' must be"),
        ("audio/hubs/hub-1/accessories/hp/telemetry/", "not a topic of the contract"),
        ("audio/hubs/hub-1/accessories/hp/commands", "not a topic of the contract"),
        ("audio/accessories/hp", "not a topic of the contract"),
        ("audio/sources/123456789ABC/state", "source id '123456789ABC' must be a Bluetooth address as 12 lowercase"),
        ("audio/sources/12:34:56:78:9a:bc/commands", "source id '12:34:56:78:9a:bc' must be a Bluetooth address"),
        ("audio/sources/123456789ab/state", "source id '123456789ab'"),
        ("audio/bridge/state", "not a topic of the contract"),
        ("audio/hubs/hub-1/responses", "not a topic of the contract"),
        ("audio/hubs/hub-1/responses/", "a response topic's name must be neither empty nor hold a wildcard"),
        ("audio/hubs/hub-1/responses/a/+/b", "a response topic's name must be neither empty"),
        ("audio/hubs/hub-1/responses/#", "a response topic's name must be neither empty"),
        ("audio/hubs/hub 1/responses/x", "hub id 'hub 1' must be"),
    ]

    @Test func aHubsOwnFilters() {
        #expect(Topic.Kind.responses.filter(under: .default, hub: Self.hub) == "audio/hubs/hub-1/responses/#")
    }

    /// In a cluster the hubs' and accessories' topics are under a slot's root, the devices' under the cluster's.
    @Test func aClusterSlotsTopics() {
        let slots = ClusterSlots(12)!
        let slot = slots.slot(of: Self.hub)
        #expect(slots.root(of: Self.hub, under: .default).rawValue == "audio/slots/\(slot)")
        #expect(Topic.Kind.telemetry.filterInEverySlot(under: .default)
            == "audio/slots/+/hubs/+/accessories/+/telemetry")
        #expect(Topic.Kind.sourceCommands.filterInEverySlot(under: .default) == "audio/sources/+/commands")
        #expect(Topic.Kind.hubStatus.filterInEverySlot(under: .default, hub: Self.hub) == "audio/slots/+/hubs/hub-1/status")
        #expect(ClusterSlots.domain(of: HubID("home-1--kitchen")!) == "home-1")
        #expect(ClusterSlots.domain(of: HubID("home-1-kitchen")!) == "home-1-kitchen")
        #expect(slots.slot(of: HubID("home-1--kitchen")!) == slots.slot(of: HubID("home-1--bedroom")!))
    }

    /// A hub's role names only its own hub id, in one bridge's topics and in every slot's; the bridge's role covers
    /// every slot; a device's stays under the cluster's root.
    @Test func rolesCoverAClustersTopics() {
        let hub = BrokerRole.hub(Self.hub, root: .default)
        #expect(hub.writes.contains("audio/slots/+/hubs/hub-1/accessories/+/telemetry"))
        #expect(hub.writes.contains("audio/hubs/hub-1/accessories/+/telemetry"))
        // Its own topics, and the bridge's layout (the same for every hub: it says how many slots there are).
        #expect(hub.reads.contains("audio/bridge/layout"))
        #expect(
            (hub.writes + hub.reads).allSatisfy {
                $0.contains("/hubs/hub-1/") || $0.contains("/frames/hub-1/") || $0 == "audio/bridge/layout"
            }, "\(hub)")
        #expect(!BrokerRole.bridge(root: .default, homeAssistantPrefix: "homeassistant").writes.contains(
            "audio/slots/+/bridge/layout"))
        let bridge = BrokerRole.bridge(root: .default, homeAssistantPrefix: "homeassistant")
        #expect(bridge.reads.contains("audio/slots/+/hubs/+/accessories/+/telemetry"))
        #expect(bridge.writes.contains("audio/slots/+/accessories/+/state"))
        #expect(bridge.writes.contains("audio/slots/+/bridge/rebuild/#"))
        #expect(!bridge.writes.contains("audio/slots/+/sources/+/commands") && bridge.writes.contains("audio/sources/+/commands"))
        #expect(bridge.writes.contains("homeassistant/device/+/+/config") && bridge.reads.contains("homeassistant/device/+/+/config"))
        #expect(Set(bridge.writes).count == bridge.writes.count && Set(bridge.reads).count == bridge.reads.count)
        let automation = BrokerRole.homeAutomation(root: .default, homeAssistantPrefix: "homeassistant")
        #expect(automation.writes.contains("audio/slots/+/accessories/+/controls"))
    }

    /// Head tracking (rule 13): the bridge writes the news to hubs (in every slot) and hosts (under the cluster's
    /// root); a hub reads its own accessories' news and writes frames as itself only, to any host; a device reads its
    /// own news and frames, and writes neither.
    @Test func rolesOfHeadTracking() {
        let hub = BrokerRole.hub(Self.hub, root: .default)
        #expect(hub.reads.contains("audio/hubs/hub-1/accessories/+/headtracking"))
        #expect(hub.reads.contains("audio/slots/+/hubs/hub-1/accessories/+/headtracking"))
        #expect(hub.writes.filter { $0.contains("/frames/") } == ["audio/sources/+/frames/hub-1/+"])
        #expect(!hub.reads.contains { $0.contains("/sources/") })
        #expect(Set(hub.writes).count == hub.writes.count && Set(hub.reads).count == hub.reads.count)

        let address = BluetoothAddress("12:34:56:78:9A:BC")!
        let device = BrokerRole.device(address, root: .default)
        #expect(device.reads == [
            "audio/sources/123456789abc/commands", "audio/sources/123456789abc/headtracking",
            "audio/sources/123456789abc/frames/+/+",
        ])
        #expect(device.writes == ["audio/sources/123456789abc/state"])

        let bridge = BrokerRole.bridge(root: .default, homeAssistantPrefix: "homeassistant")
        #expect(bridge.writes.contains("audio/hubs/+/accessories/+/headtracking"))
        #expect(bridge.writes.contains("audio/slots/+/hubs/+/accessories/+/headtracking"))
        #expect(bridge.writes.contains("audio/sources/+/headtracking"))
        #expect(!(bridge.writes + bridge.reads).contains { $0.contains("frames") }, "the bridge never sees a frame")
        let automation = BrokerRole.homeAutomation(root: .default, homeAssistantPrefix: "homeassistant")
        #expect(!automation.reads.contains { $0.contains("headtracking") || $0.contains("frames") })

        #expect(Topic.Kind.frames.isSlotted == false && Topic.Kind.hostHeadTracking.isSlotted == false)
        #expect(Topic.Kind.headTracking.isSlotted)
        #expect(Topic.Kind.frames.filterInEverySlot(under: .default, hub: Self.hub) == "audio/sources/+/frames/hub-1/+")
    }

    @Test(arguments: malformed)
    func explainsWhatIsWrong(_ name: String, _ reason: String) {
        let error = #expect(throws: TopicError.self) { try Topic(parsing: name, under: .default) }
        #expect(error?.topic == name)
        #expect(error?.reason.contains(reason) == true, "\(error?.description ?? "no error")")
    }

    @Test(arguments: ["audio", "a/b/c", "site_1/audio-2", String(repeating: "r", count: 128)])
    func acceptsRoots(_ root: String) {
        #expect(TopicRoot(root)?.rawValue == root)
    }

    @Test(arguments: ["", "/audio", "audio/", "a//b", "audio/+", "audio/#", "$SYS", "a\u{0}b", String(repeating: "r", count: 129)])
    func rejectsRoots(_ root: String) {
        #expect(TopicRoot(root) == nil)
    }
}
