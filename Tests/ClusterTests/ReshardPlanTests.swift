import AccessoryModel
import Cluster
import Testing

/// Moving a stopped cluster to another slot count, as decisions: whether it may go ahead, and where each retained
/// state goes (``ReshardPlan``).
@Suite struct ReshardPlanTests {
    static let twelve = ClusterSlots(12)!
    static let sixteen = ClusterSlots(16)!

    static func state(_ hub: String, _ accessory: String, in slot: Int, sequence: UInt64 = 10, epoch: UInt64 = 1)
        -> ReshardPlan.Retained
    {
        ReshardPlan.Retained(
            slot: slot, accessory: AccessoryID(accessory)!, hub: HubID(hub)!, lastSequence: sequence, epoch: epoch)
    }

    /// A hub whose slot differs under 12 and 16 slots, and one whose slot is the same.
    static let moving = hub { twelve.slot(of: $0) != sixteen.slot(of: $0) }
    static let staying = hub { twelve.slot(of: $0) == sixteen.slot(of: $0) }

    static func hub(where condition: (HubID) -> Bool) -> String {
        (0..<1000).lazy.map { "home-\($0)" }.first { condition(HubID($0)!) }!
    }

    @Test func itGoesAheadWithACountRecordedAndResumesOnlyAnUnfinishedReshardToTheSameCount() {
        #expect(
            ReshardPlan.decide(cluster: "c", recorded: nil, to: Self.sixteen)
                == .refuse("cluster c has no slot count recorded in etcd: no member of it ever started"))
        #expect(
            ReshardPlan.decide(cluster: "c", recorded: "many", to: Self.sixteen)
                == .refuse("cluster c records 'many' as its slot count, which is not one"))
        #expect(ReshardPlan.decide(cluster: "c", recorded: "12", to: Self.sixteen) == .record(from: Self.twelve, to: Self.sixteen))
        #expect(ReshardPlan.decide(cluster: "c", recorded: "16", to: Self.sixteen) == .nothing(Self.sixteen))
        // A reshard that ended before its moves were done: finished by a run to the same count, and only by one.
        #expect(ReshardPlan.decide(cluster: "c", recorded: "16 resharding", to: Self.sixteen) == .resume(Self.sixteen))
        #expect(
            ReshardPlan.decide(cluster: "c", recorded: "16 resharding", to: Self.twelve)
                == .refuse("cluster c has a reshard to 16 slots unfinished: run it again with --slots 16 first"))
        #expect(ReshardPlan.Recorded.resharding(to: Self.sixteen) == "16 resharding")
        #expect(ReshardPlan.Recorded.parse("16 resharding")?.0 == Self.sixteen)
        #expect(ReshardPlan.Recorded.parse("16")?.resharding == false && ReshardPlan.Recorded.parse("x resharding") == nil)
    }

    @Test func aStateMovesToItsHubsNewSlotAndOneInPlaceStays() {
        let moving = Self.state(Self.moving, "a", in: Self.twelve.slot(of: HubID(Self.moving)!))
        let staying = Self.state(Self.staying, "b", in: Self.twelve.slot(of: HubID(Self.staying)!))
        #expect(ReshardPlan.steps(for: [moving, staying], to: Self.sixteen)
            == [.move(moving, to: Self.sixteen.slot(of: HubID(Self.moving)!))])
        // The steps done, none is left: a run again moves nothing.
        var after = moving
        after.slot = Self.sixteen.slot(of: HubID(Self.moving)!)
        #expect(ReshardPlan.steps(for: [after, staying], to: Self.sixteen).isEmpty)
    }

    /// A run that ended halfway left an accessory under two slots: the newest copy (its sequence, then its epoch)
    /// is the one kept; an older copy under the target's root is overwritten by the move, not removed after it.
    @Test func ofTwoCopiesTheNewestIsKeptAndTheOtherRemoved() {
        let hub = HubID(Self.moving)!
        let old = Self.twelve.slot(of: hub), new = Self.sixteen.slot(of: hub)
        // Moved, then the old copy changed again (a member of the old count ran meanwhile): the old copy is newer.
        let newerAtOld = Self.state(Self.moving, "a", in: old, sequence: 11)
        let olderAtNew = Self.state(Self.moving, "a", in: new, sequence: 10)
        #expect(ReshardPlan.steps(for: [olderAtNew, newerAtOld], to: Self.sixteen) == [.move(newerAtOld, to: new)])
        // Moved, the old copy not yet removed: the same copy twice; the one in place is kept, the other removed.
        let atOld = Self.state(Self.moving, "a", in: old)
        let atNew = Self.state(Self.moving, "a", in: new)
        #expect(ReshardPlan.steps(for: [atOld, atNew], to: Self.sixteen) == [.remove(atOld)])
        #expect(ReshardPlan.steps(for: [atNew, atOld], to: Self.sixteen) == [.remove(atOld)])
        // Equal copies, neither in place: one answer, whatever the order (the lower slot moves).
        let third = (0..<16).first { $0 != old && $0 != new }!
        let elsewhere = Self.state(Self.moving, "a", in: third)
        let lower = min(old, third) == old ? atOld : elsewhere
        let higher = lower == atOld ? elsewhere : atOld
        #expect(ReshardPlan.steps(for: [atOld, elsewhere], to: Self.sixteen)
            == ReshardPlan.steps(for: [elsewhere, atOld], to: Self.sixteen))
        #expect(Set(ReshardPlan.steps(for: [atOld, elsewhere], to: Self.sixteen))
            == [.move(lower, to: new), .remove(higher)])
        // A newer epoch wins a tie of sequences.
        let laterOwner = Self.state(Self.moving, "a", in: third, epoch: 2)
        #expect(Set(ReshardPlan.steps(for: [atOld, laterOwner], to: Self.sixteen))
            == [.move(laterOwner, to: new), .remove(atOld)])
    }

    /// Each device is listed by the slots, under the new count, of the hubs whose accessories list it.
    @Test func devicesAreListedByTheirAccessoriesNewSlots() {
        let phone = BluetoothAddress("12:34:56:78:9A:BC")!, laptop = BluetoothAddress("DE:F0:01:23:45:67")!
        let listings = ReshardPlan.listings(
            of: [
                (HubID(Self.moving)!, [phone, laptop]), (HubID(Self.staying)!, [phone]), (HubID(Self.moving)!, [phone]),
            ],
            to: Self.sixteen)
        let moving = Self.sixteen.slot(of: HubID(Self.moving)!), staying = Self.sixteen.slot(of: HubID(Self.staying)!)
        #expect(listings == [phone: ListerSlots([moving, staying]), laptop: ListerSlots([moving])])
    }
}
