import AccessoryControl
import AccessoryModel
@testable import AccessoryWire
import Cluster
import Etcd
import Foundation
import Logging
import MQTTClient
import Synchronization
import Testing
import TestSupport

/// `accessory-bridge reshard` against real etcd, mosquitto and members: a stopped cluster moves to another slot
/// count and keeps every accessory (docs/scale-out.md, "Changing the slot count").
@Suite struct ReshardTests {
    static let logger = Logger(label: "reshard-test")
    static let phone = BluetoothAddress("12:34:56:78:9A:BC")!
    static let hubs = (0..<6).map { HubID("home-\($0)")! }

    static func accessory(_ index: Int) -> AccessoryID { AccessoryID("acc-\(index)")! }

    /// 12 slots grow to 16, then shrink to 5, home automation on. Refused while a member serves; each accessory's
    /// state (the person's pin with it) is then under the slot its hub belongs to, and nowhere else; the members
    /// started with the new count serve those accessories (a request about one that had not been restored would be
    /// refused as not paired); Home Assistant keeps one config per accessory, under the new slot's node; a run again
    /// moves nothing.
    @Test func aStoppedClusterMovesToAnotherSlotCountAndKeepsEveryAccessory() async throws {
        let etcd = try await EtcdServer()
        let broker = try await MosquittoBroker()
        let members = MemberProcesses(etcd: etcd, broker: broker, cluster: "grow", slots: 12)
        try members.start("m1", homeAutomation: true)
        try await waitUntil("m1 serves its 12 slots", timeout: .seconds(30)) { members.owners().count == 12 }
        let twelve = ClusterSlots(12)!, sixteen = ClusterSlots(16)!, five = ClusterSlots(5)!
        for (index, hub) in Self.hubs.enumerated() {
            try await Self.withHub(hub, slots: twelve, broker: broker) { hub in
                let paired = try await hub.pair(
                    Self.accessory(index), name: "Buds \(index)", model: "B", hardwareCapabilities: .all)
                try await hub.register(paired, .all)
                try await hub.report(primary: Self.phone, secondary: nil, for: paired)
                try await hub.report(placement: .onHead, for: paired)
            }
        }
        var controlsMQTT = MQTTConfiguration(clientID: "controls")
        controlsMQTT.port = broker.port
        let controls = try AccessoryControlsClient(
            mqtt: controlsMQTT, topicRoot: twelve.root(of: Self.hubs[0], under: .default), logger: Self.logger)
        try await controls.start(timeout: .seconds(20))
        let pinned = try await controls.set(AccessoryControls(pin: .source(Self.phone)), for: Self.accessory(0))
        #expect(pinned.accessory.pinnedSource == Self.phone)
        await controls.stop()

        // While m1 serves, nothing happens.
        var (code, output) = try await Self.reshard(to: 16, members)
        #expect(code != 0 && output.contains("cluster grow has members running (m1): stop every member first"), "\(output)")
        _ = try await members.stop("m1")

        let moving = Self.hubs.filter { twelve.slot(of: $0) != sixteen.slot(of: $0) }.count
        try #require(moving > 0, "some hub changes slot")
        (code, output) = try await Self.reshard(to: 16, members)
        #expect(code == 0, "\(output)")
        #expect(output.contains("12 → 16 slots: 6 accessory states, \(moving) moved, 0 older copies removed"), "\(output)")
        try await Self.expectStatesInPlace(under: sixteen, placement: .onHead, broker)
        // The device listings named the old slots (every hub's accessory lists the phone: it is shared): listed anew
        // by the slots that list it under the new count.
        try await Self.expectListed(under: sixteen, etcd)
        (code, output) = try await Self.reshard(to: 16, members)
        #expect(code == 0 && output.contains("16 → 16 slots: 6 accessory states, 0 moved"), "run again: \(output)")

        // A member with the old count refuses; one with the new count serves every accessory as it was.
        try members.start("m2", slots: 12)
        #expect(try await members.process("m2").exit(timeout: .seconds(20)) != 0)
        try members.start("m3", homeAutomation: true, slots: 16)
        try await waitUntil("m3 serves 16 slots", timeout: .seconds(30)) { members.owners().count == 16 }
        try await Self.expectServed(under: sixteen, broker)
        try await Self.expectOneConfigPerAccessory(under: sixteen, broker)
        try await Self.expectListed(under: sixteen, etcd)

        // Shrinking: the slots gone (5...15) lose what they retained; the five left serve everything.
        _ = try await members.stop("m3")
        (code, output) = try await Self.reshard(to: 5, members)
        #expect(code == 0 && output.contains("16 → 5 slots: 6 accessory states"), "\(output)")
        #expect(!output.contains(", 0 discovery configs"), "the configs of the slots gone are removed: \(output)")
        try await Self.expectStatesInPlace(under: five, placement: .offHead, broker)
        try await Self.expectListed(under: five, etcd)
        let statuses = try await Self.retained(["audio/slots/+/hubs/+/status"], broker)
        #expect(statuses.keys.allSatisfy { Self.slot(of: $0).map { $0 < 5 } ?? false }, "\(statuses.keys.sorted())")
        try members.start("m4", homeAutomation: true, slots: 5)
        try await waitUntil("m4 serves 5 slots", timeout: .seconds(30)) { members.owners().count == 5 }
        try await Self.expectServed(under: five, broker)
        try await Self.expectOneConfigPerAccessory(under: five, broker)
        _ = try await members.stop("m4")
    }

    /// Runs `accessory-bridge reshard` for `members`' cluster; its status and what it printed.
    static func reshard(to slots: Int, _ members: MemberProcesses) async throws -> (Int32, String) {
        let log = members.broker.directory.appendingPathComponent("reshard-\(UUID().uuidString).log")
        let process = try ChildProcess(
            executable: try BuiltProducts.path("accessory-bridge"),
            arguments: [
                "reshard", "--broker", "mqtt://127.0.0.1:\(members.broker.port)", "--cluster", members.etcd.endpoint,
                "--cluster-name", members.cluster, "--slots", "\(slots)",
            ],
            outputPath: log.path)
        let code = try await process.exit(timeout: .seconds(60))
        return (code, try String(contentsOf: log, encoding: .utf8))
    }

    /// The phone, which every accessory lists, is listed (and shared) by its hubs' slots under `slots`, and no other
    /// device is listed.
    static func expectListed(under slots: ClusterSlots, _ etcd: EtcdServer) async throws {
        let expected = ListerSlots(Set(hubs.map { slots.slot(of: $0) })).description
        #expect(try await etcdKeys(under: "/aab-devices/grow/listers/", etcd) == [
            "/aab-devices/grow/listers/123456789abc": expected,
        ])
        #expect(try await etcdKeys(under: "/aab/grow/shared/", etcd) == ["/aab/grow/shared/123456789abc": expected])
    }

    /// etcd's keys under `prefix`, with their values.
    static func etcdKeys(under prefix: String, _ etcd: EtcdServer) async throws -> [String: String] {
        let client = try EtcdClient(endpoint: etcd.endpoint, logger: logger)
        do {
            let session = LeaseSession(lease: try await client.grantLease(ttl: .seconds(5)))
            let entries = try await client.read(prefix: prefix, in: session).entries
            await client.shutdown()
            return Dictionary(uniqueKeysWithValues: entries.map { ($0.key, $0.value) })
        } catch {
            await client.shutdown()
            throw error
        }
    }

    /// A hub of the given slot count, started, handed to `body`, then stopped.
    static func withHub(
        _ hub: HubID, slots: ClusterSlots, broker: MosquittoBroker, _ body: (AccessoryHub) async throws -> Void
    ) async throws {
        var mqtt = MQTTConfiguration(clientID: "hub-\(hub)")
        mqtt.port = broker.port
        var options = AccessoryHub.Options()
        options.slots = slots
        options.timeout = .seconds(15)
        let accessoryHub = try AccessoryHub(hubID: hub, mqtt: mqtt, options: options, logger: logger)
        try await accessoryHub.start(timeout: .seconds(20))
        do {
            try await body(accessoryHub)
        } catch {
            await accessoryHub.stop()
            throw error
        }
        await accessoryHub.stop()
    }

    /// Every retained message under `filters`, by topic: those before a marker published after the subscriptions.
    static func retained(_ filters: [String], _ broker: MosquittoBroker) async throws -> [String: MQTTMessage] {
        var mqtt = MQTTConfiguration(clientID: "reader-\(UUID().uuidString.prefix(8))")
        mqtt.port = broker.port
        let client = try MQTTClient(configuration: mqtt, logger: logger)
        let marker = "test/marker/\(UUID().uuidString)"
        for filter in filters + [marker] { try client.subscribe(filter, qos: .atLeastOnce) }
        let stream = try client.startStreaming()
        try await client.waitUntilConnected(timeout: .seconds(20))
        try client.publish(MQTTMessage(topic: marker, payload: [1]))
        var found: [String: MQTTMessage] = [:]
        for await message in stream {
            if message.topic == marker { break }
            if !message.payload.isEmpty { found[message.topic] = message }
        }
        await client.close()
        return found
    }

    static func slot(of topic: String) -> Int? {
        guard topic.hasPrefix("audio/slots/") else { return nil }
        return Int(topic.dropFirst("audio/slots/".count).prefix { $0.isNumber })
    }

    /// Each accessory's state under its hub's slot in `slots`, and nowhere else; registered, at `placement`, acc-0
    /// pinned.
    static func expectStatesInPlace(
        under slots: ClusterSlots, placement: Placement, _ broker: MosquittoBroker
    ) async throws {
        let states = try await retained(["audio/slots/+/accessories/+/state"], broker)
        let expected = Set(hubs.indices.map {
            Topic.accessoryState(accessory: accessory($0)).name(under: slots.root(of: hubs[$0], under: .default))
        })
        #expect(Set(states.keys) == expected, "\(states.keys.sorted())")
        for (index, _) in hubs.enumerated() {
            let topic = Topic.accessoryState(accessory: accessory(index)).name(
                under: slots.root(of: hubs[index], under: .default))
            guard let message = states[topic] else { continue }
            let state = try WireCodec().decode(AccessoryState.self, from: message.payload, format: .protobuf, at: .init(unixMilliseconds: 0))
            #expect(state.accessory.registration == .registered && state.accessory.configuration.devicePlacement == placement)
            #expect(state.accessory.hub == hubs[index] && state.accessory.name == "Buds \(index)")
            #expect((state.accessory.pinnedSource == phone) == (index == 0), "\(topic)")
        }
    }

    /// Each hub, under the new count, takes its accessory off: the slot's new owner knows it.
    static func expectServed(under slots: ClusterSlots, _ broker: MosquittoBroker) async throws {
        for (index, hub) in hubs.enumerated() {
            try await withHub(hub, slots: slots, broker: broker) { hub in
                try await hub.report(placement: .offHead, for: hub.accessory(accessory(index)))
                let state = try #require(hub.lastKnownState(of: accessory(index)))
                #expect(state.accessory.registration == .registered && state.accessory.configuration.devicePlacement == .offHead)
                #expect((state.accessory.pinnedSource == phone) == (index == 0))
                #expect(state.epoch > 0)
            }
        }
    }

    /// Home Assistant: one config per accessory, under the node of its slot in `slots`.
    static func expectOneConfigPerAccessory(under slots: ClusterSlots, _ broker: MosquittoBroker) async throws {
        try await waitUntil("one config per accessory, under its slot's node", timeout: .seconds(30)) {
            let configs = try await retained(["homeassistant/device/+/+/config"], broker).keys
            return hubs.indices.allSatisfy { index in
                let matching = configs.filter { $0.hasSuffix("_acc-\(index)/config") }
                let node = "aab_audio_slots_\(slots.slot(of: hubs[index]))/"
                return matching.count == 1 && matching.first!.contains("/" + node)
            }
        }
    }
}
