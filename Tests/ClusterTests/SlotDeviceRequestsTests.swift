import AccessoryModel
import Cluster
import Testing

/// A slot's requests about its playing devices as a pure state machine: each request's calls and what it came to,
/// with etcd's replies given by the test. Who may take a shared device from whom is decided here, without a store.
@Suite struct SlotDeviceRequestsTests {
    static let keys = ClusterKeys(cluster: "c")
    static let phone = BluetoothAddress("12:34:56:78:9A:BC")!
    static let headphones = AccessoryID("headphones")!
    var machine = SlotDeviceRequests(slot: 3, keys: keys, retry: RetryPolicy())

    static func entry(_ key: String, _ value: String, revision: UInt64) -> CoordinationEntry {
        CoordinationEntry(key: key, value: value, createRevision: revision, modRevision: revision)
    }

    /// The holder key's compare-and-swap that a claim ends with.
    static func take(after revision: UInt64, wornRevision: UInt64 = 0) -> SlotDeviceRequests.Step {
        let key = keys.holder(phone)
        return .call(
            .commit(
                .init(
                    conditions: [.init(key: key, modRevision: revision)],
                    puts: [.init(key: key, value: "3/\(wornRevision)/headphones", lifetime: .session)])))
    }

    @Test(arguments: [
        // (kind, holder's slot, holder's put-on revision, this accessory's put-on revision, may take)
        (DeviceClaim.Kind.takeOver, 5, 900, 100, true),
        (.ifFree, 5, 0, 100, false),
        (.ifFree, 3, 0, 100, true),
        (.mostRecentlyWorn, 5, 90, 100, true),
        (.mostRecentlyWorn, 5, 100, 100, false),
        (.mostRecentlyWorn, 5, 110, 100, false),
        (.mostRecentlyWorn, 3, 110, 100, true),
    ])
    func whoMayTakeADeviceFromWhom(kind: DeviceClaim.Kind, holderSlot: Int, holderWorn: UInt64, worn: UInt64, may: Bool) {
        let holder = DeviceHolder(slot: holderSlot, wornRevision: holderWorn, accessory: "earbuds")
        #expect(kind.mayTake(from: holder, by: 3, wornRevision: worn) == may)
    }

    @Test mutating func aListingAddsTheSlotToTheListersAndMarksTheDeviceSharedAtTwo() {
        let listers = Self.keys.listers(Self.phone)
        #expect(machine.start(.listed(Self.phone)) == .call(.get(listers)))
        let step = machine.replied(.entry(Self.entry(listers, "7", revision: 40)))
        #expect(
            step
                == .call(
                    .commit(
                        .init(
                            conditions: [.init(key: listers, modRevision: 40)],
                            puts: [
                                .init(key: listers, value: "3,7", lifetime: .untilDeleted),
                                .init(key: Self.keys.shared(Self.phone), value: "3,7", lifetime: .untilDeleted),
                            ]))))
        // Another slot wrote it meanwhile: read again.
        #expect(machine.replied(.committed(nil)) == .call(.get(listers)))
        _ = machine.replied(.entry(Self.entry(listers, "7", revision: 41)))
        #expect(machine.replied(.committed(42)) == .done(.listed(Self.phone, listers: [3, 7], revision: 42)))
    }

    @Test mutating func anIfFreeClaimIsRefusedByAnotherSlotsHolder() {
        #expect(machine.start(.claim(.init(source: Self.phone, accessory: Self.headphones, kind: .ifFree)))
            == .call(.get(Self.keys.holder(Self.phone))))
        let holder = DeviceHolder(slot: 5, wornRevision: 0, accessory: "earbuds")
        #expect(machine.replied(.entry(Self.entry(Self.keys.holder(Self.phone), holder.description, revision: 77)))
            == .done(.refused(Self.phone, holder, revision: 77)))
        #expect(machine.held.isEmpty)
    }

    @Test mutating func aPutOnTakesTheDeviceOverAndHoldsItAtTheRevisionWritten() {
        _ = machine.start(.claim(.init(source: Self.phone, accessory: Self.headphones, kind: .takeOver)))
        let holder = DeviceHolder(slot: 5, wornRevision: 0, accessory: "earbuds")
        #expect(machine.replied(.entry(Self.entry(Self.keys.holder(Self.phone), holder.description, revision: 77)))
            == Self.take(after: 77))
        #expect(machine.replied(.committed(80))
            == .done(.claimed(Self.phone, DeviceHolder(slot: 3, wornRevision: 0, accessory: "headphones"), revision: 80)))
        #expect(machine.held == [Self.phone: 80])
        // Let go: the holder key is deleted if it is still the one written.
        _ = machine.start(.release(.init(source: Self.phone, epoch: 80)))
        #expect(machine.held.isEmpty)
    }

    /// A slot restarted, or taken over by another member, claims the device its last owner held: the holder key
    /// names this slot and accessory, but lives on the last owner's lease, and the member's directory saw it put (it
    /// would not tell the slot). Written again, it is this owner's, at a revision the directory hears.
    @Test mutating func aClaimOfADeviceItsSlotsLastOwnerHeldWritesTheHolderKeyAgain() throws {
        _ = machine.start(.claim(.init(source: Self.phone, accessory: Self.headphones, kind: .ifFree)))
        let before = DeviceHolder(slot: 3, wornRevision: 0, accessory: "headphones")
        // Required: a machine that did not make the call would take the next reply as a broken contract.
        try #require(
            machine.replied(.entry(Self.entry(Self.keys.holder(Self.phone), before.description, revision: 77)))
                == Self.take(after: 77))
        #expect(machine.replied(.committed(90)) == .done(.claimed(Self.phone, before, revision: 90)))
        #expect(machine.held == [Self.phone: 90])
    }

    @Test mutating func aRule6ClaimStandsBackForALaterPutOnElsewhereAndTakesFromAnEarlierOne() {
        // This slot's accessory was put on at revision 100.
        let worn = WornListing(accessory: Self.headphones, source: Self.phone, isWorn: true)
        _ = machine.start(.worn(worn))
        #expect(machine.replied(.committed(100)) == .done(nil))
        let claim = DeviceClaim(source: Self.phone, accessory: Self.headphones, kind: .mostRecentlyWorn)
        let prefix = Self.keys.wornListings(Self.phone)
        let mine = Self.entry(Self.keys.worn(Self.phone, by: Self.headphones), "3", revision: 100)

        // Another slot's accessory was put on later: stand back.
        #expect(machine.start(.claim(claim)) == .call(.read(prefix: prefix)))
        let later = Self.entry(Self.keys.worn(Self.phone, by: AccessoryID("earbuds")!), "5", revision: 120)
        #expect(machine.replied(.snapshot(.init(entries: [mine, later], revision: 120))) == .done(.withdrawn(Self.phone)))

        // Ours is the latest: it takes the device from a holder put on earlier.
        _ = machine.start(.claim(claim))
        let earlier = DeviceHolder(slot: 5, wornRevision: 90, accessory: "earbuds")
        #expect(machine.replied(.snapshot(.init(entries: [mine], revision: 120))) == .call(.get(Self.keys.holder(Self.phone))))
        #expect(machine.replied(.entry(Self.entry(Self.keys.holder(Self.phone), earlier.description, revision: 95)))
            == Self.take(after: 95, wornRevision: 100))
    }

    /// Two accessories of this slot are worn, and the device connected again to the one put on first, so its listing
    /// is the newest: the slot's engine routes to the one put on last (its own rule), and another slot's put-on is
    /// older than both. A stand-back for any listing but the claim's own withdrew this slot's claim, and the other
    /// slot's stood back too (its listing is older): the device stayed unrouted. Across slots only the slot counts.
    @Test mutating func aRule6ClaimGoesOnWhenTheNewestListingIsAnotherOfItsSlotsAccessories() throws {
        _ = machine.start(.worn(WornListing(accessory: Self.headphones, source: Self.phone, isWorn: true)))
        _ = machine.replied(.committed(110))
        let claim = DeviceClaim(source: Self.phone, accessory: Self.headphones, kind: .mostRecentlyWorn)
        let mine = Self.entry(Self.keys.worn(Self.phone, by: Self.headphones), "3", revision: 110)
        let relisted = Self.entry(Self.keys.worn(Self.phone, by: AccessoryID("speaker")!), "3", revision: 120)
        let elsewhere = Self.entry(Self.keys.worn(Self.phone, by: AccessoryID("earbuds")!), "5", revision: 105)
        let holderKey = Self.keys.holder(Self.phone)

        // Free: taken, as put on at the slot's newest listing.
        _ = machine.start(.claim(claim))
        try #require(
            machine.replied(.snapshot(.init(entries: [elsewhere, mine, relisted], revision: 120)))
                == .call(.get(holderKey)))
        #expect(machine.replied(.entry(nil)) == Self.take(after: 0, wornRevision: 120))
        _ = machine.replied(.committed(121))

        // Held by the other slot, whose accessory was put on after this one's but before the slot's newest listing:
        // taken, where going by this accessory's own listing (110 < 115) was refused while the other slot, seeing
        // this slot's listing newest, stood back.
        _ = machine.start(.release(.init(source: Self.phone, epoch: 121)))
        _ = machine.replied(.committed(122))
        let later = Self.entry(Self.keys.worn(Self.phone, by: AccessoryID("earbuds")!), "5", revision: 115)
        let holder = DeviceHolder(slot: 5, wornRevision: 115, accessory: "earbuds")
        _ = machine.start(.claim(claim))
        try #require(
            machine.replied(.snapshot(.init(entries: [later, mine, relisted], revision: 130))) == .call(.get(holderKey)))
        #expect(machine.replied(.entry(Self.entry(holderKey, holder.description, revision: 125)))
            == Self.take(after: 125, wornRevision: 120))
    }

    /// The other side of it: another slot's accessory listed the device last; this slot stands back whichever of its
    /// own accessories was listed last.
    @Test mutating func aRule6ClaimStandsBackForAnotherSlotsNewestListingWhateverItsOwnAreListedAs() {
        let claim = DeviceClaim(source: Self.phone, accessory: Self.headphones, kind: .mostRecentlyWorn)
        let mine = Self.entry(Self.keys.worn(Self.phone, by: Self.headphones), "3", revision: 110)
        let ownOther = Self.entry(Self.keys.worn(Self.phone, by: AccessoryID("speaker")!), "3", revision: 120)
        let elsewhere = Self.entry(Self.keys.worn(Self.phone, by: AccessoryID("earbuds")!), "5", revision: 130)
        _ = machine.start(.claim(claim))
        #expect(machine.replied(.snapshot(.init(entries: [mine, ownOther, elsewhere], revision: 130)))
            == .done(.withdrawn(Self.phone)))
    }

    /// The race of a take-off with the device's activation (SharedDeviceArbitrationTests, under load): the holder's
    /// accessory was put on after this one, then taken off (its listing deleted) and the device paused, and its slot
    /// has not let go of the device yet when the device plays again. One bridge would route it to this accessory, the
    /// only one worn; a claim that went by the holder's put-on alone was refused, and the device stayed unrouted.
    @Test mutating func aRule6ClaimTakesTheDeviceFromAHolderWhoseAccessoryWasTakenOff() {
        let worn = WornListing(accessory: Self.headphones, source: Self.phone, isWorn: true)
        _ = machine.start(.worn(worn))
        _ = machine.replied(.committed(100))
        let claim = DeviceClaim(source: Self.phone, accessory: Self.headphones, kind: .mostRecentlyWorn)
        let mine = Self.entry(Self.keys.worn(Self.phone, by: Self.headphones), "3", revision: 100)
        let holderKey = Self.keys.holder(Self.phone)
        let takenOff = DeviceHolder(slot: 5, wornRevision: 110, accessory: "earbuds")

        // Its listing is gone from the read: it is not worn, whatever its put-on's revision.
        _ = machine.start(.claim(claim))
        _ = machine.replied(.snapshot(.init(entries: [mine], revision: 130)))
        #expect(machine.replied(.entry(Self.entry(holderKey, takenOff.description, revision: 111)))
            == Self.take(after: 111, wornRevision: 100))
        _ = machine.replied(.committed(nil))  // its slot let go meanwhile: the claim starts again

        // Put on after the read (the read does not know it yet): it keeps the device.
        _ = machine.replied(.snapshot(.init(entries: [mine], revision: 105)))
        #expect(machine.replied(.entry(Self.entry(holderKey, takenOff.description, revision: 111)))
            == .done(.refused(Self.phone, takenOff, revision: 111)))

        // Still worn, and put on earlier: taken, as before.
        _ = machine.start(.claim(claim))
        let earlier = DeviceHolder(slot: 5, wornRevision: 90, accessory: "earbuds")
        let itsListing = Self.entry(Self.keys.worn(Self.phone, by: AccessoryID("earbuds")!), "5", revision: 90)
        _ = machine.replied(.snapshot(.init(entries: [itsListing, mine], revision: 130)))
        #expect(machine.replied(.entry(Self.entry(holderKey, earlier.description, revision: 95)))
            == Self.take(after: 95, wornRevision: 100))
    }

    @Test mutating func whatEtcdDoesNotAnswerIsTriedAgainWithBackoffButAReleaseGivesUp() {
        let retry = machine.retry
        let get = SlotDeviceRequests.Call.get(Self.keys.listers(Self.phone))
        _ = machine.start(.listed(Self.phone))
        #expect(machine.failed() == .retry(get, after: retry.delay(after: 1)))
        #expect(machine.failed() == .retry(get, after: retry.delay(after: 2)))
        #expect(retry.delay(after: 2) == retry.first * 2)
        _ = machine.replied(.entry(nil))
        _ = machine.replied(.committed(9))

        _ = machine.start(.release(.init(source: Self.phone, epoch: 80)))
        var steps = 0
        while case .retry = machine.failed() { steps += 1 }
        #expect(steps == retry.triesBeforeGivingUp - 1, "then it gives up: the key goes with the lease")
    }
}
