import AccessoryControl
import AccessoryModel
@testable import AccessoryWire
import Foundation
import Logging
import MQTTClient
import Testing
import TestSupport

/// A Swift hub's sequences and the bridge's rebirth requests (`R/hubs/{hub}/rebirth`), against the real bridge and
/// mosquitto. Its sequences count by one, so the bridge sees a gap only at a restart; it answers a rebirth request as
/// the C SDK does (`HubSDKTests`): from what the bridge took of the accessory, with its configuration alone when the
/// bridge had its pairing and registration before the gap, else with the whole.
@Suite struct HubRebirthTests {
    static let buds = AccessoryID("buds")!
    static let home = HubID("home")!
    static let stateTopic = Topic.accessoryState(accessory: buds).name(under: .default)
    static let rebirthTopic = Topic.rebirth(hub: home).name(under: .default)
    static let configuration = Configuration(
        devicePlacement: .onHead, deviceCapabilities: [.audioSwitching, .placement],
        primaryAudioSourceDeviceIdentifier: BridgeIntegrationTests.phone.data)

    /// A run of the hub `home`, started.
    static func startHub(_ broker: MosquittoBroker, answers: Bool = true) async throws -> AccessoryHub {
        var mqtt = MQTTConfiguration(clientID: "home-\(UUID().uuidString.prefix(8))")
        mqtt.port = broker.port
        var options = AccessoryHub.Options()
        options.timeout = .seconds(20)
        options.answersRebirthRequests = answers
        let hub = try AccessoryHub(hubID: home, mqtt: mqtt, options: options, logger: Logger(label: "hub"))
        try await hub.start(timeout: .seconds(20))
        return hub
    }

    /// The accessory's states the bridge retained, as `observer` saw them after the first `skipping`.
    static func states(_ observer: Peer, after skipping: Int = 0) throws -> [AccessoryState] {
        try observer.messages(on: stateTopic).dropFirst(skipping).map {
            try WireCodec().decode(AccessoryState.self, from: $0.payload, format: .protobuf, at: .init(unixMilliseconds: 0))
        }
    }

    /// The hub restarted: its sequences jump (each run starts at the wall clock in milliseconds), the bridge asks for
    /// a rebirth, and the new run, which learned the accessory from the bridge's first result, answers with its
    /// configuration alone: the registration is never invalidated (its route is not released), and the report that
    /// revealed the gap is not undone by the answer.
    @Test func aHubThatRestartedAnswersWithTheConfigurationAlone() async throws {
        let broker = try await MosquittoBroker()
        let bridge = try await BridgeIntegrationTests.startBridge(on: broker)
        let observer = try await Peer("observer", broker: broker, subscribe: [Self.stateTopic, Self.rebirthTopic])
        let first = try await Self.startHub(broker)
        let paired = try await first.pair(Self.buds, name: "Studio", model: "S", hardwareCapabilities: .all)
        try await first.register(paired, Self.configuration)
        await first.stop()
        let before = observer.messages(on: Self.stateTopic).count
        // The next run's first sequence is the wall clock, some milliseconds past the last one sent: a gap.
        try await Task.sleep(for: .milliseconds(20))

        let second = try await Self.startHub(broker)
        try await second.report(placement: .inEar, for: second.accessory(Self.buds))
        _ = try await observer.waitFor(1, on: Self.rebirthTopic)
        try await waitUntil("the rebirth answered: \(second.rebirthStatus)") {
            second.rebirthStatus.updates + second.rebirthStatus.whole + second.rebirthStatus.unknown > 0
        }
        #expect(second.rebirthStatus.updates == 1, "\(second.rebirthStatus)")
        let status = second.rebirthStatus
        #expect(status.requests == 1 && status.whole == 0 && status.unknown == 0 && status.malformed == 0)
        // The answer's update came after the placement report: still in the ear, and registered throughout.
        try await waitUntil("the update's state retained") { try Self.states(observer, after: before).count >= 2 }
        let states = try Self.states(observer, after: before)
        #expect(states.allSatisfy { $0.accessory.registration == .registered }, "\(states.map(\.accessory.registration))")
        #expect(states.last?.accessory.configuration == {
            var configuration = Self.configuration
            configuration.devicePlacement = .inEar
            return configuration
        }())
        await second.stop()
        await observer.close()
        try await bridge.stop()
    }

    /// Requests a while apart are no gap to the bridge (each run counts by one from the wall clock at its first); a
    /// run whose count starts behind the bridge's (a run before it counted further than the clock went) is answered
    /// a duplicate at first, moves past the bridge's count, and its request is applied.
    @Test func sequencesCountByOneAndARunBehindTheBridgeMovesPastIt() async throws {
        let broker = try await MosquittoBroker()
        let bridge = try await BridgeIntegrationTests.startBridge(on: broker)
        let observer = try await Peer(
            "observer", broker: broker,
            subscribe: [Self.stateTopic, Self.rebirthTopic, "audio/hubs/home/accessories/buds/result"])
        let hub = try await Self.startHub(broker)
        let paired = try await hub.pair(Self.buds, name: "Studio", model: "S", hardwareCapabilities: .all)
        try await hub.register(paired, Self.configuration)
        for placement in [Placement.inEar, .offHead, .onHead, .inEar] {
            try await Task.sleep(for: .milliseconds(10))  // the wall clock moves on between them
            try await hub.report(placement: placement, for: paired)
        }
        // Paired, registered, configured, and four placements. The bridge publishes a message's rebirth request after
        // its answer and state, and before the next message's, in order: once the seventh state is in, a rebirth
        // request for any of the six before it would have come.
        try await waitUntil("seven states retained") { try Self.states(observer).count >= 7 }
        let sequences = try Self.states(observer).map(\.accessory.lastSequence)
        #expect(sequences.count == 7 && zip(sequences, sequences.dropFirst()).allSatisfy { $1 == $0 + 1 }, "\(sequences)")
        #expect(observer.messages(on: Self.rebirthTopic).isEmpty, "no gap")
        #expect(hub.rebirthStatus.requests == 0)
        await hub.stop()

        // Another run of the hub counted far ahead (here: a request an hour ahead of the clock).
        let ahead = UInt64(WallClock.system.now.unixMilliseconds) + 3_600_000
        #expect(try await observer.request(.placement(.inEar), hub: "home", accessory: "buds", sequence: ahead).error == .none)
        let behind = try await Self.startHub(broker)
        try await behind.report(placement: .offHead, for: behind.accessory(Self.buds))
        let state = try #require(behind.lastKnownState(of: Self.buds))
        #expect(state.accessory.configuration.devicePlacement == .offHead && state.accessory.lastSequence == ahead + 1)
        await behind.stop()
        await observer.close()
        try await bridge.stop()
    }

    /// A request whose last sequence comes before the pairing and registration the hub sent (the bridge may have
    /// missed them) gets the whole rebirth: paired, registered and configured again. One about an accessory the hub
    /// knows nothing of, and an unreadable one, are counted and left alone. A one-shot tool acting for the same hub
    /// (`Options.answersRebirthRequests` off) answers none of them.
    @Test func theWholeRebirthWhenTheBridgeMayHaveMissedThePairing() async throws {
        let broker = try await MosquittoBroker()
        let bridge = try await BridgeIntegrationTests.startBridge(on: broker)
        let observer = try await Peer("observer", broker: broker, subscribe: [Self.stateTopic])
        let hub = try await Self.startHub(broker)
        let paired = try await hub.pair(Self.buds, name: "Studio", model: "S", hardwareCapabilities: .all)
        try await hub.register(paired, Self.configuration)
        let tool = try await Self.startHub(broker, answers: false)
        let before = observer.messages(on: Self.stateTopic).count

        // As the bridge would ask after a gap that began before the pairing.
        func ask(_ payload: [UInt8]) throws {
            try observer.client.publish(MQTTMessage(topic: Self.rebirthTopic, payload: payload, qos: .atLeastOnce))
        }
        try ask(WireCodec().encode(RebirthRequest(accessory: Self.buds, lastSequence: 1, receivedSequence: 3), as: .protobuf))
        try await waitUntil("the whole rebirth sent") { hub.rebirthStatus.whole == 1 }
        try await waitUntil("paired, registered and configured again") {
            let states = try Self.states(observer, after: before)
            return states.count >= 3 && states.last?.accessory.registration == .registered
                && states.last?.accessory.configuration == Self.configuration
        }
        // Paired again, a registered accessory's registration is invalidated until the register.
        #expect(try Self.states(observer, after: before).first?.accessory.registration == .invalidated)

        try ask(WireCodec().encode(RebirthRequest(accessory: AccessoryID("ghost")!, lastSequence: 1, receivedSequence: 3), as: .protobuf))
        try ask([0xff, 0xff, 0xff])
        try await waitUntil("the unknown and the unreadable counted") {
            hub.rebirthStatus.unknown == 1 && hub.rebirthStatus.malformed == 1
        }
        #expect(hub.rebirthStatus.requests == 2 && hub.rebirthStatus.updates == 0, "\(hub.rebirthStatus)")
        #expect(tool.rebirthStatus.requests == 0 && tool.rebirthStatus.malformed == 0)
        await tool.stop()
        await hub.stop()
        await observer.close()
        try await bridge.stop()
    }
}
