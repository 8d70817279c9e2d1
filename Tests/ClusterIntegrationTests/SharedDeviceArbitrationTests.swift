import AccessoryControl
import AccessoryModel
import AccessoryWire
import Cluster
import Etcd
import Foundation
import Logging
import MQTTClient
import Synchronization
import Testing
import TestSupport

/// A playing device listed by the accessories of two households whose slots two members serve (docs/scale-out.md,
/// "Shared devices"), on a real etcd and a real mosquitto: rule 6 gives it to the accessory put on last, in etcd's
/// order, whichever member asks first; rule 4 takes it from the other slot; the device is never routed to two
/// accessories, and it applies every holder's commands (none is older than what it applied).
@Suite(.serialized) struct SharedDeviceArbitrationTests {
    static let device = BluetoothAddress("5A:33:00:00:00:01")!

    /// A playing device as docs/wire-contract.md has it: it applies a command whose (epoch, sequence) is above the
    /// last it applied, and reports its state (retained) after each.
    final class PlayingDevice: Sendable {
        let address: BluetoothAddress
        let client: MQTTClient
        private let codec = WireCodec()
        private let state = Mutex(State())

        struct State {
            var activity = Activity.idle
            var routed: AccessoryID?
            var last = CommandOrder(epoch: 0, sequence: 0)
            var applied: [SwitchCommand] = []
            var dropped: [SwitchCommand] = []
            var reports: UInt64 = 0
        }

        init(_ address: BluetoothAddress, broker: MosquittoBroker) async throws {
            self.address = address
            var mqtt = MQTTConfiguration(clientID: "device-\(address.topicID)")
            mqtt.port = broker.port
            var logger = Logger(label: "device")
            logger.logLevel = .warning
            client = try MQTTClient(configuration: mqtt, logger: logger)
            try client.subscribe(Topic.sourceCommands(source: address).name(under: .default), qos: .atLeastOnce)
            try client.start { [self] message in
                guard let command = try? codec.decode(SwitchCommand.self, from: message.payload, format: .protobuf, source: address)
                else { return }
                let report: SourceReport? = self.state.withLock { state in
                    guard command.order > state.last else {
                        state.dropped.append(command)
                        return nil
                    }
                    state.last = command.order
                    state.applied.append(command)
                    switch command.action {
                    case .routeToAccessory: state.routed = command.accessoryID
                    case .pause: state.routed = nil; state.activity = .idle
                    case .resume: state.activity = .media
                    case .release: state.routed = nil
                    }
                    return Self.report(&state)
                }
                if let report { try? self.client.publish(Self.message(report, for: address, codec: self.codec)) }
            }
            try await client.waitUntilConnected(timeout: .seconds(20))
        }

        private static func report(_ state: inout State) -> SourceReport {
            state.reports += 1
            return SourceReport(
                sequence: state.reports, activity: state.activity, routedAccessory: state.routed,
                lastCommandSequence: state.last.sequence, lastCommandEpoch: state.last.epoch)
        }

        private static func message(_ report: SourceReport, for address: BluetoothAddress, codec: WireCodec) -> MQTTMessage {
            MQTTMessage(
                topic: Topic.sourceState(source: address).name(under: .default), payload: codec.encode(report, as: .protobuf),
                qos: .atLeastOnce, retain: true)
        }

        /// The person plays something, or stops.
        func play(_ activity: Activity) throws {
            let report = state.withLock { state in
                state.activity = activity
                return Self.report(&state)
            }
            try client.publish(Self.message(report, for: address, codec: codec))
        }

        var applied: [SwitchCommand] { state.withLock { $0.applied } }
        var dropped: [SwitchCommand] { state.withLock { $0.dropped } }
        var routed: AccessoryID? { state.withLock { $0.routed } }
    }

    /// Two households (routing domains) whose slots m1 and m2 serve, a1 the first's accessory and a2 the second's,
    /// both registered and connected to the shared device, neither worn; the test reads etcd as a member would.
    struct Households {
        let members: MemberProcesses
        let broker: MosquittoBroker
        let store: EtcdClient
        let session: LeaseSession
        let keys = ClusterKeys(cluster: "test")
        let device: PlayingDevice
        let accessories = [AccessoryID("a1")!, AccessoryID("a2")!]
        let hubs: [AccessoryHub]
        let paired: [PairedAccessory]

        /// Puts accessory `index` on (or takes it off) and waits until its worn listing is in etcd (or gone).
        func place(_ index: Int, _ placement: Placement) async throws {
            try await hubs[index].report(placement: placement, for: paired[index])
            try await waitUntilListed(index, placement != .offHead)
        }

        func waitUntilListed(_ index: Int, _ worn: Bool, timeout: Duration = .seconds(10)) async throws {
            try await waitUntil("\(accessories[index]) \(worn ? "listed" : "no longer listed") as worn", timeout: timeout) {
                (try await store.get(keys.worn(SharedDeviceArbitrationTests.device, by: accessories[index]), in: session) != nil)
                    == worn
            }
        }

        /// The device's commands as "ACTION accessory REASON".
        var applied: [String] { device.applied.map { "\($0.action) \($0.accessoryID) \($0.reason)" } }
    }

    /// Runs `body` on two fresh households; lets go of the etcd client on every path (an HTTP client released without
    /// its shutdown stops the test process, and with it every other test of the run).
    static func withHouseholds(_ body: (Households) async throws -> Void) async throws {
        let etcd = try await EtcdServer()
        let broker = try await MosquittoBroker()
        let members = MemberProcesses(etcd: etcd, broker: broker)
        for name in ["m1", "m2"] { try members.start(name) }
        try await members.waitUntilServed(by: ["m1", "m2"])
        let slots = ClusterSlots(members.slots)!
        func hub(servedBy member: String) -> HubID {
            (0..<1000).lazy.compactMap { HubID("home\($0)--hub") }
                .first { Rendezvous.owner(of: slots.slot(of: $0), among: ["m1", "m2"]) == member }!
        }
        var logger = Logger(label: "test")
        logger.logLevel = .warning
        let store = try EtcdClient(endpoint: etcd.endpoint, logger: logger)
        do {
            let session = LeaseSession(lease: try await store.grantLease(ttl: .seconds(60)))
            let device = try await PlayingDevice(Self.device, broker: broker)
            try device.play(.idle)
            var hubs: [AccessoryHub] = []
            var paired: [PairedAccessory] = []
            for (hubID, accessory) in zip([hub(servedBy: "m1"), hub(servedBy: "m2")], [AccessoryID("a1")!, AccessoryID("a2")!]) {
                var mqtt = MQTTConfiguration(clientID: "\(hubID)")
                mqtt.port = broker.port
                var options = AccessoryHub.Options()
                options.slots = slots
                options.timeout = .seconds(30)  // an answer may wait for a takeover
                let hub = try AccessoryHub(hubID: hubID, mqtt: mqtt, options: options, logger: logger)
                try await hub.start(timeout: .seconds(20))
                let pairing = try await hub.pair(accessory, name: "\(accessory)", model: "M", hardwareCapabilities: .all)
                try await hub.register(pairing, [.audioSwitching, .placement])
                try await hub.report(primary: Self.device, secondary: nil, for: pairing)
                hubs.append(hub)
                paired.append(pairing)
            }
            let households = Households(
                members: members, broker: broker, store: store, session: session, device: device, hubs: hubs,
                paired: paired)
            try await waitUntil("the device is shared by both slots") {
                (try await store.get(households.keys.shared(Self.device), in: session))
                    .map { ListerSlots(parsing: $0.value).slots.count } == 2
            }
            try await body(households)
            for hub in hubs { await hub.stop() }
            await device.client.close()
        } catch {
            await store.shutdown()
            throw error
        }
        await store.shutdown()
    }

    @Test func aSharedDeviceGoesToTheMostRecentlyWornAccessoryWhicheverMemberServesIt() async throws {
        try await Self.withHouseholds { homes in
            let (device, accessories) = (homes.device, homes.accessories)
            // a1 is put on, then a2: when the device plays, a2 is the most recently worn, whichever slot asks first.
            try await homes.place(0, .onHead)
            try await homes.place(1, .onHead)
            try device.play(.media)
            try await waitUntil("the device routed") { device.routed != nil }
            #expect(device.routed == accessories[1])

            // a2 is taken off (rule 5 pauses the device); it plays again: now a1 is the only worn one.
            try await homes.place(1, .offHead)
            try await waitUntil("the device paused") { device.applied.count == 2 }
            try device.play(.media)
            try await waitUntil("the device routed to a1") { device.routed == accessories[0] }

            // a2 is put on again: rule 4 takes the device from the other slot, as one bridge would.
            try await homes.place(1, .onHead)
            try await waitUntil("the device routed to a2 again") { device.routed == accessories[1] }

            #expect(
                homes.applied == [
                    "ROUTE_TO_ACCESSORY a2 SOURCE_ACTIVATED", "PAUSE a2 TAKEN_OFF", "ROUTE_TO_ACCESSORY a1 SOURCE_ACTIVATED",
                    "ROUTE_TO_ACCESSORY a2 PUT_ON",
                ], "one command per change, each from the slot that holds the device")
            #expect(device.dropped.isEmpty, "no holder's command was older than what the device applied: \(device.dropped)")
            let epochs = device.applied.map(\.epoch)
            #expect(epochs == epochs.sorted() && Set(epochs).count == 3, "each holding is a newer epoch: \(epochs)")
            // The retained states: a2 has the device, a1 does not (its slot let it go without a command).
            try await waitUntil("a1's state no longer names the device, a2's does") {
                let states = try await Self.retainedStates(broker: homes.broker)
                return states[accessories[0]]?.routedSource == nil && states[accessories[1]]?.routedSource == Self.device
            }
        }
    }

    /// Rule 6 stands back for another slot's newer put-on, counting on that slot to claim the device. Here that
    /// listing is out of date: a1 was taken off while m1, its member, was paused. m1's lease ends, m2 takes a1's slot
    /// over and reads the take-off, and the listing goes; nothing about the device changes meanwhile, so only rule 6
    /// looking again (a second after each stand-back, SharedDeviceStateMachine) routes it to a2, still worn.
    @Test func aStandBackForAPausedMembersPutOnIsLookedAtAgainOnceItsListingIsGone() async throws {
        try await Self.withHouseholds { homes in
            try await homes.place(1, .onHead)
            try await homes.place(0, .onHead)
            let m1 = try homes.members.process("m1")
            m1.signal(SIGSTOP)
            try await waitUntil("m1 stopped") { m1.isStopped }
            // The take-off waits in a1's slot's session until m2 takes the slot over (the answer comes from m2).
            let takeOff = Task { try await homes.hubs[0].report(placement: .offHead, for: homes.paired[0]) }
            try homes.device.play(.media)
            try await homes.waitUntilListed(0, false, timeout: .seconds(30))
            try await waitUntil("the device routed to a2", timeout: .seconds(15)) {
                homes.device.routed == homes.accessories[1]
            }
            #expect(homes.applied == ["ROUTE_TO_ACCESSORY a2 SOURCE_ACTIVATED"], "one command, from a2's slot")
            try await takeOff.value
            #expect(homes.members.owners()[ClusterSlots(homes.members.slots)!.slot(of: homes.hubs[0].hubID)] == "m2")
            _ = try homes.members.kill("m1")
        }
    }

    /// Every accessory's retained state, read through a short session.
    static func retainedStates(broker: MosquittoBroker) async throws -> [AccessoryID: AccessoryState] {
        var mqtt = MQTTConfiguration(clientID: "reader-\(UUID().uuidString.prefix(8))")
        mqtt.port = broker.port
        var logger = Logger(label: "reader")
        logger.logLevel = .warning
        let client = try MQTTClient(configuration: mqtt, logger: logger)
        let states = Mutex<[AccessoryID: AccessoryState]>([:])
        let codec = WireCodec()
        let marker = "test/marker/\(UUID().uuidString.prefix(8))"
        try client.subscribe("audio/slots/+/accessories/+/state", qos: .atLeastOnce)
        try client.subscribe(marker, qos: .atLeastOnce)
        let done = Atomic(false)
        try client.start { message in
            if message.topic == marker {
                done.store(true, ordering: .releasing)
            } else if let state = try? codec.decode(
                AccessoryState.self, from: message.payload, format: .protobuf, at: Timestamp(unixMilliseconds: 0))
            {
                states.withLock { $0[state.accessory.id] = state }
            }
        }
        try await client.waitUntilConnected(timeout: .seconds(20))
        try client.publish(MQTTMessage(topic: marker, payload: [1], qos: .atLeastOnce))
        try await waitUntil("the retained states read") { done.load(ordering: .acquiring) }
        await client.close()
        return states.withLock { $0 }
    }
}
