import AccessoryModel
import BridgeCore
import Testing

/// A cluster's slot publishes nothing that shows a new listing of a playing device before etcd has it (docs/
/// scale-out.md, "Shared devices"): the core's gate holds back what follows a new listing, and lets it go, in the order
/// it was decided, once etcd answered. Without a shell or a store: the answers are reported as the shell would.
@Suite struct ListingGateTests {
    static let now = SlotTests.now
    static let phone = SlotTests.phone
    static let laptop = SlotTests.laptop
    let hub = SlotTests.hub(in: 3)
    var core = SlotTests.machine()

    mutating func send(_ request: AccessoryRequest, _ sequence: UInt64, _ id: String = "a") -> [BridgeAction] {
        core.telemetry(.success(request), sequence: sequence, from: hub, about: AccessoryID(id)!, at: Self.now)
    }

    /// The sequences answered, in order (each answer's state carries the accessory's last sequence).
    static func answered(_ actions: [BridgeAction]) -> [UInt64] {
        actions.compactMap { if case .answer(let answer) = $0 { answer.state?.accessory.lastSequence } else { nil } }
    }

    /// Whether `actions` show `source` listed by a published state or answer.
    static func shows(_ source: BluetoothAddress, _ actions: [BridgeAction]) -> Bool {
        actions.contains {
            switch $0 {
            case .publishState(let state): state.accessory.configuration.primaryAudioSourceDeviceIdentifier == source.data
            case .answer(let answer):
                answer.state?.accessory.configuration.primaryAudioSourceDeviceIdentifier == source.data
            default: false
            }
        }
    }

    mutating func released() -> [BridgeAction] {
        var all: [BridgeAction] = []
        while let next = core.nextReleased(at: Self.now) { all += next }
        return all
    }

    mutating func registered(_ id: String = "a") {
        _ = send(.paired(name: "A", model: "M", hardwareCapabilities: .all), 1, id)
        _ = send(.register(.all), 2, id)
    }

    @Test mutating func nothingThatShowsANewListingGoesOutBeforeEtcdHasIt() {
        registered()
        // The listing's own action goes out (the shell subscribes and asks etcd); what shows it waits.
        let listing = send(.sources(primary: Self.phone.data, secondary: nil), 3)
        #expect(listing == [.watchSource(Self.phone)])
        #expect(core.isHolding)
        // Whatever comes meanwhile waits behind it, deadlines too.
        #expect(send(.placement(.onHead), 4) == [])
        #expect(core.sourceReported(SourceReport(activity: .media), from: Self.laptop, at: Self.now) == [])
        #expect(core.tick(at: Self.now.advanced(byMilliseconds: 60_000)) == [])
        #expect(core.nextReleased(at: Self.now) == nil, "nothing goes before etcd answers")

        // etcd has it: the answer ends the wait; what waited goes, in the order it was decided, then the answer.
        #expect(core.sharedDevice(.listed(Self.phone, shared: false), at: Self.now) == [])
        let released = released()
        #expect(Self.shows(Self.phone, released))
        #expect(Self.answered(released) == [3, 4])
        #expect(!core.isHolding)
        #expect(Self.answered(send(.placement(.offHead), 5)) == [5], "nothing waits once etcd answered")
    }

    @Test mutating func aListingInWhatIsLetGoHoldsTheRestAgainBeforeWhatStillWaits() {
        registered("a")
        registered("b")
        #expect(send(.sources(primary: Self.phone.data, secondary: nil), 3, "a") == [.watchSource(Self.phone)])
        // Decided when its turn comes: it lists the laptop, which is new too.
        #expect(send(.sources(primary: Self.laptop.data, secondary: nil), 3, "b") == [])
        #expect(send(.placement(.onHead), 4, "a") == [])

        _ = core.sharedDevice(.listed(Self.phone, shared: false), at: Self.now)
        let first = released()
        #expect(Self.answered(first) == [3])
        #expect(first.contains(.watchSource(Self.laptop)), "the next listing goes out at its turn")
        #expect(!Self.shows(Self.laptop, first), "and what shows it waits again")
        #expect(core.isHolding)

        _ = core.sharedDevice(.listed(Self.laptop, shared: false), at: Self.now)
        let rest = released()
        #expect(Self.shows(Self.laptop, rest))
        #expect(Self.answered(rest) == [3, 4], "b's answer before a's next: the order they were decided in")
    }

    @Test mutating func republishingThatWaitedAsksForItsNextBatchOnceLetGo() {
        registered()
        // Two states could not be published.
        for (sequence, id) in [(1, "x"), (2, "y")] {
            let actions = send(.paired(name: "A", model: "M", hardwareCapabilities: .all), UInt64(sequence), id)
            for case .answer(let answer) in actions { core.notSent(.publishState(answer.state!)) }
        }
        _ = send(.sources(primary: Self.phone.data, secondary: nil), 3)
        #expect(core.publishingResumed(at: Self.now, statesAtMost: 1) == [])
        _ = core.sharedDevice(.listed(Self.phone, shared: false), at: Self.now)
        let released = released()
        #expect(released.contains(.continuePublishing), "one state of two, and the next batch is asked for")
        #expect(core.publishingResumed(at: Self.now, statesAtMost: 1).last != .continuePublishing)
    }

    @Test mutating func aSingleBridgeHasNoGate() {
        var single = BridgeStateMachine(instanceID: "t")
        for (sequence, request) in [
            (1, AccessoryRequest.paired(name: "A", model: "M", hardwareCapabilities: .all)), (2, .register(.all)),
        ] {
            _ = single.telemetry(.success(request), sequence: UInt64(sequence), from: hub, about: AccessoryID("a")!, at: Self.now)
        }
        let actions = single.telemetry(
            .success(.sources(primary: Self.phone.data, secondary: nil)), sequence: 3, from: hub,
            about: AccessoryID("a")!, at: Self.now)
        #expect(Self.answered(actions) == [3])
        #expect(!single.isHolding && single.nextReleased(at: Self.now) == nil)
    }
}
