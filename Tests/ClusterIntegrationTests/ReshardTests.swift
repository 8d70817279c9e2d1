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

/// `accessory-bridge reshard` against real etcd, mosquitto and members: a running cluster moves to another slot
/// count and keeps every accessory (docs/scale-out.md, "Changing the slot count").
@Suite struct ReshardTests {
    static let logger = Logger(label: "reshard-test")
    static let phone = BluetoothAddress("12:34:56:78:9A:BC")!
    static let hubs = (0..<6).map { HubID("home-\($0)")! }

    static func accessory(_ index: Int) -> AccessoryID { AccessoryID("acc-\(index)")! }

    /// Two members serve 12 slots, home automation on; the cluster grows to 16 slots, then shrinks to 5, while they
    /// run. Each time the members leave and join again with the new count (the same processes); each accessory's
    /// state (the person's pin with it) is then under the slot its hub belongs to, and nowhere else; the device
    /// listings name the new slots; the members serve those accessories (a request about one that had not been
    /// restored would be refused as not paired); Home Assistant keeps one config per accessory, under its new slot's
    /// node, with the same ids, and each device that changed slot was handed over from its old config topic (Home
    /// Assistant's migration payload, then the old topic emptied); a run to the count the cluster has does nothing;
    /// a member given the old count refuses to join.
    @Test func aRunningClusterMovesToAnotherSlotCountAndKeepsEveryAccessory() async throws {
        let etcd = try await EtcdServer()
        let broker = try await MosquittoBroker()
        let members = MemberProcesses(etcd: etcd, broker: broker, cluster: "grow", slots: 12)
        for name in ["m1", "m2"] { try members.start(name, homeAutomation: true) }
        try await members.waitUntilServed(by: ["m1", "m2"])
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

        // 12 → 16.
        let moving = Self.hubs.filter { twelve.slot(of: $0) != sixteen.slot(of: $0) }.count
        try #require(moving > 0, "some hub changes slot")
        try await Self.expectOneConfigPerAccessory(under: twelve, broker)
        var configs = try await ConfigRecorder(broker)
        var (code, output) = try await Self.reshard(to: 16, members)
        #expect(code == 0, "\(output)")
        #expect(output.contains("12 → 16 slots: 6 accessory states, \(moving) moved, 0 older copies removed"), "\(output)")
        // Each accessory and hub that changed slot: its device handed over (one of each per moving hub).
        #expect(output.contains("\(2 * moving) Home Assistant devices handed over"), "\(output)")
        #expect(Set(members.lines("waiting for the reshard to end, to join again").compactMap { $0["cluster.member"] as? String })
            == ["m1", "m2"])
        try await Self.expectStatesInPlace(under: sixteen, placement: .onHead, broker)
        try await Self.expectListed(under: sixteen, etcd)
        try await Self.waitUntilServed(sixteen, members)
        try await Self.expectServed(under: sixteen, broker)
        try await Self.expectOneConfigPerAccessory(under: sixteen, broker)
        Self.expectHandedOver(from: twelve, to: sixteen, await configs.stop())
        (code, output) = try await Self.reshard(to: 16, members)
        #expect(code == 0 && output.contains("the cluster has 16 slots already: nothing to do"), "run again: \(output)")

        // 16 → 5: the slots gone lose what they retained.
        let shrinking = Self.hubs.filter { sixteen.slot(of: $0) != five.slot(of: $0) }.count
        configs = try await ConfigRecorder(broker)
        (code, output) = try await Self.reshard(to: 5, members)
        #expect(code == 0 && output.contains("16 → 5 slots: 6 accessory states"), "\(output)")
        #expect(output.contains("\(2 * shrinking) Home Assistant devices handed over"), "\(output)")
        #expect(!output.contains(", 0 discovery configs"), "the configs of the slots gone are removed: \(output)")
        try await Self.expectStatesInPlace(under: five, placement: .offHead, broker)
        try await Self.expectListed(under: five, etcd)
        let statuses = try await Self.retained(["audio/slots/+/hubs/+/status"], broker)
        #expect(statuses.keys.allSatisfy { Self.slot(of: $0).map { $0 < 5 } ?? false }, "\(statuses.keys.sorted())")
        try await Self.waitUntilServed(five, members)
        try await Self.expectServed(under: five, broker)
        try await Self.expectOneConfigPerAccessory(under: five, broker)
        Self.expectHandedOver(from: sixteen, to: five, await configs.stop())
        #expect(try members.process("m1").isRunning && members.process("m2").isRunning, "the same processes throughout")

        // A member started with the old count is refused, naming both.
        try members.start("m3", slots: 12)
        #expect(try await members.process("m3").exit(timeout: .seconds(20)) != 0)
        #expect(members.logText.contains("this cluster was created with 5 slots, and this member was given 12"))
        for name in ["m1", "m2"] { _ = try await members.stop(name) }
    }

    /// Waits until `slots` are all served, by the running members m1 and m2, and no other slot is.
    static func waitUntilServed(_ slots: ClusterSlots, _ members: MemberProcesses) async throws {
        try await waitUntil("\(slots) served by m1 and m2", timeout: .seconds(60)) {
            let owners = members.owners()
            return Set(owners.keys) == Set(0..<slots.count) && Set(owners.values).isSubset(of: ["m1", "m2"])
        }
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

    /// Home Assistant: one config per accessory, under the node of its slot in `slots`, with the fleet's ids (the
    /// same under any slot).
    static func expectOneConfigPerAccessory(under slots: ClusterSlots, _ broker: MosquittoBroker) async throws {
        try await waitUntil("one config per accessory, under its slot's node", timeout: .seconds(30)) {
            let configs = try await retained(["homeassistant/device/+/+/config"], broker)
            return hubs.indices.allSatisfy { index in
                let matching = configs.filter { $0.key.hasSuffix("_acc-\(index)/config") }
                return matching.count == 1 && matching.first!.key == configTopic(of: index, under: slots)
                    && (try? JSONSerialization.jsonObject(with: Data(matching.first!.value.payload)) as? [String: Any])
                        .flatMap { ($0["dev"] as? [String: Any])?["ids"] as? [String] } == ["aab_audio_acc-\(index)"]
            }
        }
    }

    /// Where accessory `index`'s config is under `slots`.
    static func configTopic(of index: Int, under slots: ClusterSlots) -> String {
        "homeassistant/device/aab_audio_slots_\(slots.slot(of: hubs[index]))/aab_audio_acc-\(index)/config"
    }

    /// Each accessory whose hub changed slot from `old` to `new` was handed over in what `recorded` saw: its old
    /// config topic got Home Assistant's migration payload, then was emptied, and only then did its config come under
    /// the new one. An accessory that stayed got neither.
    static func expectHandedOver(from old: ClusterSlots, to new: ClusterSlots, _ recorded: [MQTTMessage]) {
        for index in hubs.indices {
            let before = configTopic(of: index, under: old), after = configTopic(of: index, under: new)
            let handOver = Array(#"{"migrate_discovery":true}"#.utf8)
            let atBefore = recorded.enumerated().filter { $0.element.topic == before && !$0.element.retain }
            if before == after {
                #expect(!atBefore.contains { $0.element.payload == handOver || $0.element.payload.isEmpty }, "\(before)")
                continue
            }
            #expect(atBefore.map(\.element.payload) == [handOver, []], "\(before): \(atBefore.map(\.element.payload))")
            let firstAfter = recorded.firstIndex { $0.topic == after && !$0.payload.isEmpty }
            #expect(firstAfter != nil && atBefore.allSatisfy { $0.offset < firstAfter! }, "\(after)")
        }
    }
}

/// Every message on Home Assistant's discovery configs from its start until ``stop()``, in the order the broker
/// delivered them (those retained before it, flagged `retain`, first).
final class ConfigRecorder: Sendable {
    private final class Messages: Sendable {
        let list = Mutex<[MQTTMessage]>([])
    }
    private let client: MQTTClient
    private let messages = Messages()
    private let reading: Task<Void, Never>

    init(_ broker: MosquittoBroker) async throws {
        var mqtt = MQTTConfiguration(clientID: "configs-\(UUID().uuidString.prefix(8))")
        mqtt.port = broker.port
        client = try MQTTClient(configuration: mqtt, logger: ReshardTests.logger)
        let marker = "test/marker/\(UUID().uuidString)"
        for filter in ["homeassistant/device/+/+/config", marker] { try client.subscribe(filter, qos: .atLeastOnce) }
        let stream = try client.startStreaming()
        let messages = messages
        reading = Task { for await message in stream { messages.list.withLock { $0.append(message) } } }
        try await client.waitUntilConnected(timeout: .seconds(20))
        try client.publish(MQTTMessage(topic: marker, payload: [1]))
        try await waitUntil("the recorder's subscriptions in place") {
            messages.list.withLock { $0.contains { $0.topic == marker } }
        }
    }

    /// What it recorded (its marker left out).
    func stop() async -> [MQTTMessage] {
        await client.close()
        await reading.value
        return messages.list.withLock { $0.filter { !$0.topic.hasPrefix("test/marker/") } }
    }
}
