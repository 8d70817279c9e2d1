import AccessoryModel
@testable import AccessoryWire
import CAudioHub
import Foundation
import Logging
import MQTTClient
import Synchronization
import Testing
import TestSupport

/// A hub that is not told the slot count (`AUDIOHUB_SLOTS_FROM_BRIDGE`) reads it from the bridge's retained layout
/// (`R/bridge/layout`, docs/scale-out.md), and follows it: against the real bridge, alone and then as a cluster.
@Suite struct HubLayoutTests {
    /// Before the layout the hub says nothing (no status, no will, no telemetry) and its requests wait; once a
    /// bridge publishes it, the hub connects under its root and the request completes.
    @Test func beforeTheLayoutTheHubSaysNothingAndItsRequestsWaitForIt() async throws {
        let fixture = try await BridgeFixture(startsBridge: false)
        let observer = try await Observer(fixture.broker)
        let hub = try TestHub("layout-hub", broker: fixture.broker) {
            #expect(audiohub_int_option($0, AUDIOHUB_OPT_SLOTS, AUDIOHUB_SLOTS_FROM_BRIDGE) == AUDIOHUB_ERR_SUCCESS)
        }
        // Subscribed to the layout alone, and waiting.
        try await fixture.broker.waitForLog("layout-hub 1 audio/bridge/layout", timeout: .seconds(20))
        #expect(audiohub_slots(hub.handle) == -1 && !audiohub_is_connected(hub.handle))
        let token = try hub.request { audiohub_pair($0, "buds", "Studio Pro", "SP-2", AUDIOHUB_CAP_ALL, $1, $2) }

        try await fixture.startBridge()
        let paired = try await hub.completion(token, timeout: .seconds(30))
        #expect(paired.succeeded, "\(paired.message)")
        #expect(audiohub_slots(hub.handle) == 0 && hub.stats.layout_moves == 1 && hub.stats.layout_malformed == 0)
        #expect(try await hubStatus(fixture.broker, "audio/hubs/layout-hub/status").online)

        // What the observer saw of the hub: its status only under its root, and only after the bridge's layout.
        try await observer.waitFor("the hub's online status") { $0.contains { $0.topic == "audio/hubs/layout-hub/status" } }
        let seen = observer.messages
        let ofTheHub = seen.indices.filter { seen[$0].topic.contains("/layout-hub/") }
        let layout = try #require(seen.firstIndex { $0.topic == "audio/bridge/layout" })
        #expect(ofTheHub.allSatisfy { $0 > layout }, "\(seen.map(\.topic))")
        #expect(ofTheHub.allSatisfy { seen[$0].topic.hasPrefix("audio/hubs/layout-hub/") }, "\(seen.map(\.topic))")
        await observer.close()
    }

    /// A fleet grows from one bridge to a cluster: the single bridge goes, a member of 12 slots starts, and its
    /// layout moves the hub under its slot's root. The hub says offline where it was, is born again there from its
    /// cache (nobody re-pairs anything), its head-tracking session ends and the cluster starts another, and its next
    /// request is the cluster's.
    @Test func aHubFollowsTheLayoutFromASingleBridgeToACluster() async throws {
        let fixture = try await BridgeFixture()
        let hub = try TestHub("mover", broker: fixture.broker) {
            #expect(audiohub_int_option($0, AUDIOHUB_OPT_SLOTS, AUDIOHUB_SLOTS_FROM_BRIDGE) == AUDIOHUB_ERR_SUCCESS)
        }
        try hub.recordHeadTracking()
        // Worn, routed to the playing device, whose head tracking is on: a session.
        try await HubHeadTrackingTests.report(fixture.broker, sequence: 1, headTracking: true)
        let paired = try await hub.perform { audiohub_pair($0, "buds", "Studio Pro", "SP-2", AUDIOHUB_CAP_ALL, $1, $2) }
        var apple = audiohub_spatial_extension(
            component_type: 0xaaf, component_sub_type: 0xc0f, component_manufacturer: 0xb05e, component_flags: 0,
            component_flags_mask: 0)
        let size = MemoryLayout<audiohub_spatial_extension>.size
        let registered = try await hub.perform {
            audiohub_register_spatial($0, "buds", AUDIOHUB_CAP_ALL, &apple, size, $1, $2)
        }
        var host = address(HubHeadTrackingTests.host)
        let sources = try await hub.perform { audiohub_sources($0, "buds", &host, nil, $1, $2) }
        let placed = try await hub.perform { audiohub_placement($0, "buds", AUDIOHUB_PLACEMENT_ON_HEAD, $1, $2) }
        #expect(paired.succeeded && registered.succeeded && sources.succeeded && placed.succeeded && placed.epoch == 0)
        #expect(audiohub_slots(hub.handle) == 0)
        guard case .activate(let first) = try await hub.headTrackingCalls(count: 1)[0] else {
            Issue.record("no session before the move")
            return
        }

        // Killed: a bridge that stops invalidates its sessions itself, one that dies cannot.
        let observer = try await Observer(fixture.broker)
        try await fixture.killBridge()
        let cluster = BridgeClusterProcesses(broker: fixture.broker, etcd: try await EtcdServer(), name: "grown")
        let member = try cluster.startMember("m1", slots: 12)
        do {
            try await Self.followIntoTheCluster(hub, fixture: fixture, first: first)
        } catch {
            await cluster.end(member)
            await observer.close()
            throw error
        }
        await cluster.end(member)
        // No telemetry went out under the old root after the bridge died: the rebirth waited for the connection
        // under the new one (it went out on the old connection, to the old root's topics, before CONN_MOVING).
        let oldTelemetry = observer.messages.map(\.topic).filter {
            $0.hasPrefix("audio/hubs/mover/") && $0.hasSuffix("/telemetry")
        }
        #expect(oldTelemetry.isEmpty, "\(oldTelemetry)")
        await observer.close()
    }

    private static func followIntoTheCluster(
        _ hub: TestHub, fixture: BridgeFixture, first: SessionCopy
    ) async throws {
        try await waitUntil("the hub under the cluster's layout", timeout: .seconds(60)) {
            audiohub_slots(hub.handle) == 12 && audiohub_is_connected(hub.handle)
        }
        try await hub.waitUntilIdle(timeout: .seconds(60))
        // The single bridge's states are not the cluster's: the move's update is refused, the whole rebirth follows.
        #expect(hub.stats.layout_moves == 2 && hub.stats.rebirth_requests == 4)
        let slot = ClusterSlots(12)!.slot(of: HubID("mover")!)
        // Born again in its slot from the cache: paired, registered, on head, by this hub.
        let state = try Audioaccessory_V1_AccessoryState(
            serializedBytes: await retainedPayload(fixture.broker, "audio/slots/\(slot)/accessories/buds/state"))
        #expect(state.registration == .registered && state.configuration.devicePlacement == .onHead)
        #expect(state.name == "Studio Pro" && state.hubID == "mover" && state.epoch > 0)
        #expect(try await hubStatus(fixture.broker, "audio/slots/\(slot)/hubs/mover/status").online)
        #expect(try await !hubStatus(fixture.broker, "audio/hubs/mover/status").online)
        // The single bridge's session ended with the move (the hub itself ended it: reason unspecified); the
        // cluster's owner started its own.
        let calls = try await hub.headTrackingCalls(count: 3, timeout: .seconds(30))
        #expect(calls[1] == .invalidate(first, reason: AUDIOHUB_HEAD_TRACKING_REASON_UNSPECIFIED.rawValue), "\(calls)")
        guard case .activate(let second) = calls[2] else {
            Issue.record("no session under the cluster: \(calls)")
            return
        }
        #expect(second.sessionID != first.sessionID && second.epoch == state.epoch)

        let after = try await hub.perform { audiohub_placement($0, "buds", AUDIOHUB_PLACEMENT_OFF_HEAD, $1, $2) }
        #expect(after.succeeded && after.epoch == state.epoch, "\(after.message)")
        // The rebirth's requests had no callback: the caller saw its five requests complete, once each.
        #expect(hub.recorder.completions.withLock { $0.count } == 5)
    }

    /// A layout the SDK cannot read (a count past 4,096, or bytes that are no BridgeLayout) is counted and changes
    /// nothing: the hub keeps waiting for one it can read.
    @Test func anUnreadableLayoutIsCountedAndTheHubWaitsOn() async throws {
        let broker = try await MosquittoBroker()
        let hub = try TestHub("layout-bad", broker: broker) {
            #expect(audiohub_int_option($0, AUDIOHUB_OPT_SLOTS, AUDIOHUB_SLOTS_FROM_BRIDGE) == AUDIOHUB_ERR_SUCCESS)
        }
        try await broker.waitForLog("layout-bad 1 audio/bridge/layout", timeout: .seconds(20))
        var configuration = MQTTConfiguration(clientID: "layout-writer")
        configuration.port = broker.port
        let writer = try MQTTClient(configuration: configuration, logger: Logger(label: "layout-writer"))
        try writer.start { _ in }
        try await writer.waitUntilConnected()
        for payload in [
            Array(#"{"slots": 4097}"#.utf8), Array(#"{"slots": "twelve"}"#.utf8), [0x08, 0x81, 0x20],  // 4,097
            [0xff, 0xff],
        ] {
            try writer.publish(MQTTMessage(topic: "audio/bridge/layout", payload: payload, retain: true))
        }
        try await waitUntil("four unreadable layouts counted") { hub.stats.layout_malformed == 4 }
        #expect(audiohub_slots(hub.handle) == -1 && hub.stats.layout_moves == 0)
        // One it can read, as JSON (a bridge run with --payload-format json): 12 slots.
        try writer.publish(MQTTMessage(
            topic: "audio/bridge/layout", payload: Array(#"{"slots": 12, "version": "0.1.0"}"#.utf8), retain: true,
            properties: MQTTProperties(contentType: "application/json")))
        try await waitUntil("the layout taken") { audiohub_slots(hub.handle) == 12 }
        #expect(hub.stats.layout_moves == 1 && hub.stats.layout_malformed == 4)
        await writer.close()
    }
}

extension HubLayoutTests {
    /// A running cluster is resharded (`accessory-bridge reshard`) under a hub that follows the layout: the hub moves
    /// to its new slot, where its accessory already is (the reshard moved its state), and nothing it asked fails.
    @Test func aHubFollowsAReshardOfItsRunningCluster() async throws {
        let broker = try await MosquittoBroker(extraConfig: BridgeFixture.queues)
        let cluster = BridgeClusterProcesses(broker: broker, etcd: try await EtcdServer(), name: "follow")
        let id = HubID("follower")!
        let twelve = ClusterSlots(12)!
        let count = try #require((13...64).first { ClusterSlots($0)!.slot(of: id) != twelve.slot(of: id) })
        let member = try cluster.startMember("m1", slots: 12)
        do {
            try await Self.followAReshard(cluster, to: count)
        } catch {
            await cluster.end(member)
            throw error
        }
        await cluster.end(member)
    }

    private static func followAReshard(_ cluster: BridgeClusterProcesses, to count: Int) async throws {
        let broker = cluster.broker
        let id = HubID("follower")!
        let hub = try TestHub("follower", broker: broker) {
            #expect(audiohub_int_option($0, AUDIOHUB_OPT_SLOTS, AUDIOHUB_SLOTS_FROM_BRIDGE) == AUDIOHUB_ERR_SUCCESS)
        }
        try await waitUntil("the hub under 12 slots", timeout: .seconds(60)) {
            audiohub_slots(hub.handle) == 12 && audiohub_is_connected(hub.handle)
        }
        let paired = try await hub.perform { audiohub_pair($0, "buds", "Studio Pro", "SP-2", AUDIOHUB_CAP_ALL, $1, $2) }
        let registered = try await hub.perform { audiohub_register($0, "buds", AUDIOHUB_CAP_ALL, $1, $2) }
        #expect(paired.succeeded && registered.succeeded)

        let observer = try await Observer(broker)
        let reshard = try await cluster.reshard(to: count)
        #expect(reshard.code == 0, "\(reshard.output)")
        try await waitUntil("the hub under \(count) slots", timeout: .seconds(60)) {
            audiohub_slots(hub.handle) == count && audiohub_is_connected(hub.handle)
        }
        let placed = try await hub.perform { audiohub_placement($0, "buds", AUDIOHUB_PLACEMENT_ON_HEAD, $1, $2) }
        #expect(placed.succeeded, "\(placed.message)")
        try await hub.waitUntilIdle(timeout: .seconds(60))
        let state = try Audioaccessory_V1_AccessoryState(
            serializedBytes: await retainedPayload(
                broker, "audio/slots/\(ClusterSlots(count)!.slot(of: id))/accessories/buds/state"))
        #expect(state.registration == .registered && state.configuration.devicePlacement == .onHead && state.epoch > 0)
        #expect(hub.stats.layout_moves == 2)
        #expect(hub.recorder.completions.withLock { $0.allSatisfy(\.succeeded) && $0.count == 3 })
        // The new root knew the accessory (the reshard moved its state): the move asked with one update, and paired
        // nothing again, which would have invalidated its registration (and released its route) for a moment.
        #expect(hub.stats.rebirth_requests == 1)
        let states = try observer.messages.filter { $0.topic.hasSuffix("/accessories/buds/state") && !$0.payload.isEmpty }
            .map { try Audioaccessory_V1_AccessoryState(serializedBytes: $0.payload).registration }
        #expect(!states.isEmpty && !states.contains(.invalidated), "\(states)")
        await observer.close()
    }

    /// A new count that leaves the hub in its slot changes only the count; one that moves it reconnects it under its
    /// new root.
    @Test func aNewCountMovesTheHubOnlyWhenItsSlotChanges() async throws {
        let broker = try await MosquittoBroker()
        let hub = try TestHub("layout-count", broker: broker) {
            #expect(audiohub_int_option($0, AUDIOHUB_OPT_SLOTS, AUDIOHUB_SLOTS_FROM_BRIDGE) == AUDIOHUB_ERR_SUCCESS)
        }
        let id = HubID("layout-count")!
        let twelve = ClusterSlots(12)!.slot(of: id)
        let same = try #require((13...4096).first { ClusterSlots($0)!.slot(of: id) == twelve })
        let other = try #require((13...4096).first { ClusterSlots($0)!.slot(of: id) != twelve })
        var configuration = MQTTConfiguration(clientID: "layout-writer")
        configuration.port = broker.port
        let writer = try MQTTClient(configuration: configuration, logger: Logger(label: "layout-writer"))
        try writer.start { _ in }
        try await writer.waitUntilConnected()
        func publish(_ slots: Int) throws {
            let layout = WireCodec().encode(BridgeLayout(slots: ClusterSlots(slots)), as: .protobuf)
            try writer.publish(MQTTMessage(topic: "audio/bridge/layout", payload: layout, retain: true))
        }
        try publish(12)
        try await waitUntil("connected under slot \(twelve) of 12") {
            audiohub_slots(hub.handle) == 12 && audiohub_is_connected(hub.handle)
        }
        #expect(hub.stats.connections == 1)
        try publish(same)
        try await waitUntil("the count \(same) taken") { audiohub_slots(hub.handle) == same }
        #expect(hub.stats.connections == 1 && audiohub_is_connected(hub.handle), "the same slot: no move")
        try publish(other)
        try await waitUntil("moved under slot \(ClusterSlots(other)!.slot(of: id)) of \(other)") {
            audiohub_slots(hub.handle) == other && hub.stats.connections == 2 && audiohub_is_connected(hub.handle)
        }
        #expect(hub.stats.layout_moves == 3)
        await writer.close()
    }
}

/// Every message under `audio/#`, in the order the broker delivered them.
final class Observer: Sendable {
    private final class Inbox: Sendable {
        let messages = Mutex<[MQTTMessage]>([])
    }

    private let client: MQTTClient
    private let inbox = Inbox()

    init(_ broker: MosquittoBroker) async throws {
        var configuration = MQTTConfiguration(clientID: "observer-\(UUID().uuidString.prefix(8))")
        configuration.port = broker.port
        client = try MQTTClient(configuration: configuration, logger: Logger(label: "observer"))
        try client.subscribe("audio/#", qos: .atLeastOnce)
        try client.start { [inbox] message in inbox.messages.withLock { $0.append(message) } }
        try await client.waitUntilConnected(timeout: .seconds(20))
        try await broker.waitForLog("\(configuration.clientID) 1 audio/#", timeout: .seconds(20))
    }

    var messages: [MQTTMessage] { inbox.messages.withLock { $0 } }

    func waitFor(_ what: String, _ condition: @escaping ([MQTTMessage]) -> Bool) async throws {
        try await waitUntil(what, timeout: .seconds(30)) { condition(messages) }
    }

    func close() async { await client.close() }
}
