import AccessoryControl
import AccessoryModel
@testable import AccessoryWire
import Foundation
import Logging
import MQTTClient
import Testing
import TestSupport

/// A Swift hub that is not told the slot count (`AccessoryHub.Options.followsLayout`) reads it from the bridge's
/// retained layout and follows it, as the C SDK's `AUDIOHUB_SLOTS_FROM_BRIDGE` does (`HubLayoutTests`): against the
/// real bridge alone, then a member of a cluster of 12 slots on a real etcd.
@Suite struct HubLayoutFollowingTests {
    /// Before any layout the hub's first request waits for one; a fleet then grows from one bridge to a cluster, and
    /// the hub moves under its slot's root: offline where it was, born again there from what it said (nobody pairs
    /// anything again), and the request it had in flight at the move is answered by the cluster.
    @Test func aSwiftHubFollowsTheLayoutFromASingleBridgeToACluster() async throws {
        let broker = try await MosquittoBroker()
        var mqtt = MQTTConfiguration(clientID: "mover")
        mqtt.port = broker.port
        var options = AccessoryHub.Options()
        options.followsLayout = true
        options.timeout = .seconds(60)
        let hub = try AccessoryHub(hubID: HubID("mover")!, mqtt: mqtt, options: options, logger: Logger(label: "hub"))
        try await hub.start(timeout: .seconds(20))
        // No bridge, no layout: the pairing waits for them.
        let pairing = Task { try await hub.pair(AccessoryID("buds")!, name: "Studio Pro", model: "SP-2", hardwareCapabilities: .all) }
        // Subscribed to the layout (the broker says so), and none retained: nothing followed.
        try await broker.waitForLog("mover 1 audio/bridge/layout", timeout: .seconds(20))
        #expect(hub.layoutStatus.layout == nil && hub.layoutStatus.followed == 0)
        let bridge = try await BridgeIntegrationTests.startBridge(on: broker)
        let buds = try await pairing.value
        #expect(hub.layoutStatus.layout?.slots == nil && hub.layoutStatus.followed == 1 && hub.layoutStatus.moves == 0)
        try await hub.register(
            buds,
            Configuration(
                devicePlacement: .onHead, deviceCapabilities: [.audioSwitching, .placement],
                primaryAudioSourceDeviceIdentifier: BridgeIntegrationTests.phone.data))
        #expect(hub.lastKnownState(of: buds.id)?.epoch == 0)
        try await bridge.stop()

        // Sent while no bridge serves: in flight at the move, it goes again under the new root.
        let during = Task { try await hub.report(placement: .inEar, for: buds) }
        let cluster = BridgeClusterProcesses(broker: broker, etcd: try await EtcdServer(), name: "grown")
        let member = try cluster.startMember("m1", slots: 12)
        try await Self.run({
            try await during.value
            try await Self.checkTheMove(of: hub, buds, broker: broker)
        }, then: {
            await cluster.end(member)
            await hub.stop()
        })
    }

    private static func checkTheMove(of hub: AccessoryHub, _ buds: PairedAccessory, broker: MosquittoBroker) async throws {
        #expect(hub.layoutStatus.layout?.slots == ClusterSlots(12))
        #expect(hub.layoutStatus.moves == 1 && hub.layoutStatus.followed == 2 && hub.layoutStatus.malformed == 0)
        let slot = ClusterSlots(12)!.slot(of: HubID("mover")!)
        let codec = WireCodec()
        // Born again in its slot, then the request that waited: registered, in the ear, by this hub.
        let stateTopic = "audio/slots/\(slot)/accessories/buds/state"
        let statusTopics = ["audio/slots/\(slot)/hubs/mover/status", "audio/hubs/mover/status"]
        let observer = try await Peer("observer", broker: broker, subscribe: [stateTopic] + statusTopics)
        let state = try codec.decode(
            Audioaccessory_V1_AccessoryState.self, from: try await observer.waitFor(1, on: stateTopic)[0].payload,
            format: .protobuf)
        #expect(state.registration == .registered && state.configuration.devicePlacement == .inEar)
        #expect(state.name == "Studio Pro" && state.hubID == "mover" && state.epoch > 0)
        #expect(hub.lastKnownState(of: buds.id)?.epoch == state.epoch)
        let online = try statusTopics.map { topic in
            try codec.decode(Audioaccessory_V1_HubStatus.self, from: observer.messages(on: topic).last?.payload ?? [], format: .protobuf)
                .online
        }
        #expect(online == [true, false], "online under its slot, offline where it was")
        await observer.close()

        // The next request is the cluster's.
        try await hub.report(placement: .offHead, for: buds)
        #expect(hub.lastKnownState(of: buds.id)?.accessory.configuration.devicePlacement == .offHead)
    }

    /// A running cluster is resharded under the hub: the new root knows its accessory (the reshard moved its state),
    /// so the move asks with the configuration alone and pairs nothing again: the registration never turns
    /// invalidated, and nothing the hub asked fails.
    @Test func aSwiftHubFollowsAReshardAndPairsNothingAgain() async throws {
        let broker = try await MosquittoBroker()
        let cluster = BridgeClusterProcesses(broker: broker, etcd: try await EtcdServer(), name: "follow")
        let id = HubID("follower")!
        let count = try #require((13...64).first { ClusterSlots($0)!.slot(of: id) != ClusterSlots(12)!.slot(of: id) })
        let member = try cluster.startMember("m1", slots: 12)
        var mqtt = MQTTConfiguration(clientID: "follower")
        mqtt.port = broker.port
        var options = AccessoryHub.Options()
        options.followsLayout = true
        options.timeout = .seconds(60)
        let hub = try AccessoryHub(hubID: id, mqtt: mqtt, options: options, logger: Logger(label: "hub"))
        try await Self.run({
            try await hub.start(timeout: .seconds(20))
            let buds = try await hub.pair(AccessoryID("buds")!, name: "Studio Pro", model: "SP-2", hardwareCapabilities: .all)
            try await hub.register(buds, Configuration(devicePlacement: .onHead, deviceCapabilities: [.audioSwitching, .placement]))
            #expect(hub.layoutStatus.layout?.slots == ClusterSlots(12))
            let observer = try await Peer("observer", broker: broker, subscribe: ["audio/slots/+/accessories/buds/state"])
            let reshard = try await cluster.reshard(to: count)
            #expect(reshard.code == 0, "\(reshard.output)")
            try await waitUntil("the hub under \(count) slots", timeout: .seconds(60)) {
                hub.layoutStatus.layout?.slots == ClusterSlots(count) && hub.layoutStatus.moves == 1
            }
            try await hub.report(placement: .inEar, for: buds)
            let states = observer.everything().filter { $0.topic.hasSuffix("/state") && !$0.payload.isEmpty }
            let registrations = try states.map { message in
                let format = try PayloadFormat.detect(contentType: message.properties.contentType, payload: message.payload)
                return try WireCodec().decode(Audioaccessory_V1_AccessoryState.self, from: message.payload, format: format)
                    .registration
            }
            #expect(!registrations.isEmpty && !registrations.contains(.invalidated), "\(registrations)")
            #expect(hub.lastKnownState(of: buds.id)?.accessory.configuration.devicePlacement == .inEar)
            await observer.close()
        }, then: {
            await cluster.end(member)
            await hub.stop()
        })
    }

    /// Runs `body`, then `cleanup` whether it threw or not.
    private static func run(_ body: () async throws -> Void, then cleanup: () async -> Void) async throws {
        do {
            try await body()
        } catch {
            await cleanup()
            throw error
        }
        await cleanup()
    }
}
