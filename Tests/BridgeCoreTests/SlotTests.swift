import AccessoryModel
import BridgeCore
import Testing

/// A cluster's slot as its own state machine (docs/scale-out.md): it serves only its slot's hubs, says which playing
/// devices' states to read, and stamps its epoch on what it publishes.
@Suite struct SlotTests {
    static let slots = ClusterSlots(12)!
    static let now = Timestamp(unixMilliseconds: 1_763_790_000_000)
    static let phone = BluetoothAddress("12:34:56:78:9A:BC")!
    static let laptop = BluetoothAddress("12:34:56:78:9A:BD")!
    static let tv = BluetoothAddress("12:34:56:78:9A:BE")!

    /// A hub id of `slot`.
    static func hub(in slot: Int, _ n: Int = 0) -> HubID {
        (0...).lazy.map { HubID("hub-\(n)-\($0)")! }.first { slots.slot(of: $0) == slot }!
    }

    static func machine(slot: Int = 3, epoch: UInt64 = 57) -> BridgeStateMachine {
        BridgeStateMachine(instanceID: "t", slot: ClusterSlot(slot, of: slots)!, epoch: epoch)
    }

    static func watches(_ actions: [BridgeAction]) -> [String] {
        actions.compactMap {
            switch $0 {
            case .watchSource(let source): "+\(source)"
            case .unwatchSource(let source): "-\(source)"
            default: nil
            }
        }
    }

    @Test func fnv1aIsTheReferenceFunction() {
        // The published FNV-1a-64 test vectors; the C SDK's audiohub_slot is checked against the same slots.
        #expect(FNV1a.hash("") == 0xcbf2_9ce4_8422_2325)
        #expect(FNV1a.hash("a") == 0xaf63_dc4c_8601_ec8c)
        #expect(FNV1a.hash("foobar") == 0x8594_4171_f739_67e8)
        #expect(ClusterSlots(0) == nil && ClusterSlots(4097) == nil && ClusterSlot(12, of: Self.slots) == nil)
    }

    @Test(arguments: [
        ("home-17--kitchen", "home-17"), ("home-17", "home-17"), ("--x", ""), ("x--", "x"), ("a---b", "a"),
        ("a-b-c", "a-b-c"), ("-", "-"), ("a-", "a-"),
    ])
    func aHubsDomainIsItsIdUpToTheFirstTwoDashes(id: String, domain: String) throws {
        #expect(ClusterSlots.domain(of: try #require(HubID(id))) == domain[...])
    }

    @Test func aHubOfAnotherSlotIsRefusedWithItsSlot() throws {
        var core = Self.machine(slot: 3)
        let stranger = Self.hub(in: 5)
        let actions = core.telemetry(
            .success(.paired(name: "A", model: "M", hardwareCapabilities: .all)), sequence: 1, from: stranger,
            about: AccessoryID("acc")!, at: Self.now)
        guard case .answer(let answer) = try #require(actions.first), case .failed(let error) = answer.result else {
            Issue.record("expected a refusal, got \(actions)")
            return
        }
        #expect(actions.count == 1 && answer.state == nil)
        #expect(error.code == .invalidRequest)
        #expect(error.reason.contains("belongs to slot 5 of 12, not to slot 3"))
        #expect(core.accessoryCount == 0)
        #expect(core.refusal(of: Self.hub(in: 3)) == nil)
    }

    /// Runs `actions` as the shell would, with etcd answering every new listing (not shared): what they and what
    /// was held back behind them came to.
    static func listed(_ actions: [BridgeAction], by core: inout BridgeStateMachine) -> [BridgeAction] {
        var all = actions
        for case .watchSource(let source) in actions {
            all += core.sharedDevice(.listed(source, shared: false), at: now)
        }
        while let released = core.nextReleased(at: now) {
            all += listed(released, by: &core)
        }
        return all
    }

    @Test func theSlotReadsTheDevicesItsAccessoriesList() {
        var core = Self.machine()
        let hub = Self.hub(in: 3)
        func send(_ request: AccessoryRequest, _ sequence: UInt64, _ id: String) -> [BridgeAction] {
            Self.listed(
                core.telemetry(.success(request), sequence: sequence, from: hub, about: AccessoryID(id)!, at: Self.now),
                by: &core)
        }
        for id in ["a", "b"] {
            _ = send(.paired(name: "A", model: "M", hardwareCapabilities: .all), 1, id)
            _ = send(.register(.all), 2, id)
        }
        #expect(Self.watches(send(.sources(primary: Self.phone.data, secondary: Self.laptop.data), 3, "a"))
            == ["+\(Self.phone)", "+\(Self.laptop)"])
        // Already read for "a": nothing new.
        #expect(Self.watches(send(.sources(primary: Self.phone.data, secondary: nil), 3, "b")) == [])
        // "a" moves from the laptop to the TV; the phone stays listed by "b".
        #expect(Self.watches(send(.sources(primary: Self.tv.data, secondary: nil), 4, "a"))
            == ["+\(Self.tv)", "-\(Self.laptop)"])
        #expect(Self.watches(send(.unpaired, 4, "b")) == ["-\(Self.phone)"])
        #expect(core.watchedSources == [Self.tv])
    }

    @Test func restoredAccessoriesListTheirDevicesWithoutActions() {
        var core = Self.machine()
        let accessory = Accessory(
            id: AccessoryID("a")!, hub: Self.hub(in: 3), registration: .registered, hardwareCapabilities: .all,
            configuration: Configuration(
                deviceCapabilities: .all, primaryAudioSourceDeviceIdentifier: Self.phone.data,
                secondaryAudioSourceDeviceIdentifier: Self.tv.data),
            updatedAt: Self.now)
        core.restore(AccessoryState(accessory, routedSource: nil, epoch: 40), at: Self.now)
        core.restoringFinished()
        #expect(Set(core.watchedSources) == [Self.phone, Self.tv])
        // Published again under this owner's epoch, whatever the retained one said.
        #expect(core.state(of: accessory.id)?.epoch == 57)
    }

    @Test func aSingleBridgeWatchesNothingAndStampsEpochZero() {
        var core = BridgeStateMachine(instanceID: "t")
        let hub = Self.hub(in: 5)
        _ = core.telemetry(
            .success(.paired(name: "A", model: "M", hardwareCapabilities: .all)), sequence: 1, from: hub,
            about: AccessoryID("a")!, at: Self.now)
        _ = core.telemetry(.success(.register(.all)), sequence: 2, from: hub, about: AccessoryID("a")!, at: Self.now)
        let actions = core.telemetry(
            .success(.sources(primary: Self.phone.data, secondary: nil)), sequence: 3, from: hub,
            about: AccessoryID("a")!, at: Self.now)
        #expect(Self.watches(actions) == [])
        #expect(core.watchedSources.isEmpty)
        #expect(core.state(of: AccessoryID("a")!)?.epoch == 0)
    }

    @Test func statesAndCommandsCarryTheEpoch() {
        var core = Self.machine(epoch: 57)
        let hub = Self.hub(in: 3)
        let id = AccessoryID("a")!
        _ = core.sourceReported(SourceReport(activity: .media), from: Self.phone, at: Self.now)
        _ = core.telemetry(
            .success(.paired(name: "A", model: "M", hardwareCapabilities: .all)), sequence: 1, from: hub, about: id,
            at: Self.now)
        _ = core.telemetry(.success(.register(.all)), sequence: 2, from: hub, about: id, at: Self.now)
        _ = core.telemetry(
            .success(.sources(primary: Self.phone.data, secondary: nil)), sequence: 3, from: hub, about: id,
            at: Self.now)
        // A device the slot newly lists waits until etcd has the listing and says whether another slot lists it too.
        let waiting = core.telemetry(.success(.placement(.onHead)), sequence: 4, from: hub, about: id, at: Self.now)
        #expect(waiting.isEmpty, "held by the gate")
        let actions = Self.listed([.watchSource(Self.phone)], by: &core)
        let commands = actions.compactMap { if case .sendCommand(let command) = $0 { command } else { nil } }
        #expect(!commands.isEmpty && commands.allSatisfy { $0.epoch == 57 })
        let answered = actions.compactMap { if case .answer(let answer) = $0 { answer.state } else { nil } }
        let published = actions.compactMap { if case .publishState(let state) = $0 { state } else { nil } }
        #expect(answered.count == 2 && !published.isEmpty)
        #expect((answered + published).allSatisfy { $0.epoch == 57 })
    }
}
