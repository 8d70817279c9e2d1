@testable import AccessoryModel
import Testing

/// The routing engine's sub-machine for shared devices, alone: when a slot claims a device, when a decision that
/// waited runs again, when a route ends without a command, when a device is let go, and the epochs its commands carry.
/// (SharedDeviceTests drives the same rules through the engine.)
@Suite struct SharedDeviceStateMachineTests {
    typealias Machine = SharedDeviceStateMachine
    let phone = Fixture.phone
    let headphones = Fixture.headphones
    let earbuds = Fixture.earbuds
    var machine = Machine()

    @Test mutating func aNewlyListedDeviceWaitsUnclaimedUntilEtcdSaysWhetherItIsShared() {
        machine.listed(phone)
        let (allowed, claim) = machine.mayRoute(phone, to: headphones, for: .putOn)
        #expect(!allowed, "unconfirmed: it waits like a shared device")
        #expect(claim == nil, "and nothing is claimed before etcd has the listing")
        // Not shared after all: the put-on runs again.
        let (changed, action) = machine.shared(phone, false, routedTo: nil, kept: true)
        #expect(!changed)
        #expect(action == .decideAgain(.init(accessory: headphones, rule: .putOn, claimed: false)))
        #expect(machine.mayRoute(phone, to: headphones, for: .putOn) == (true, nil))
    }

    @Test mutating func aSharedDeviceIsClaimedOnceForWhatWaitsAndAPutOnAsksMore() {
        _ = machine.shared(phone, true, routedTo: nil, kept: true)
        let first = machine.mayRoute(phone, to: headphones, for: .activated)
        #expect(first.allowed == false && first.claim == DeviceClaim(source: phone, accessory: headphones, kind: .mostRecentlyWorn))
        // A candidate's claim asks no more than rule 6's on its way: not sent again.
        #expect(machine.mayRoute(phone, to: headphones, for: .candidate(.sourceActivated)).claim == nil)
        // A put-on takes over, which asks more.
        #expect(machine.mayRoute(phone, to: earbuds, for: .putOn).claim == DeviceClaim(source: phone, accessory: earbuds, kind: .takeOver))
        #expect(machine.mayRoute(phone, to: earbuds, for: .putOn).claim == nil, "once")
    }

    @Test mutating func aRouteTheSlotHadIsClaimedWhenItsDeviceTurnsOutShared() {
        let (changed, action) = machine.shared(phone, true, routedTo: headphones, kept: true)
        #expect(changed)
        #expect(action == .claim(DeviceClaim(source: phone, accessory: headphones, kind: .ifFree)))
        // Held: the commands carry the holder key's revision, and the kept route needs nothing more.
        #expect(machine.claimed(phone, epoch: 900) == .decideAgain(.init(accessory: headphones, rule: .keep, claimed: true)))
        #expect(machine.epoch(of: phone, slotEpoch: 57) == 900)
        #expect(machine.releases { _ in true }.isEmpty, "routed here and shared: kept")
        #expect(machine.releases { _ in false } == [DeviceRelease(source: phone, epoch: 900)], "no longer routed: let go")
    }

    @Test mutating func aLostClaimDropsTheRouteAndHandsTheWaitingDecisionBack() {
        _ = machine.shared(phone, true, routedTo: nil, kept: true)
        _ = machine.mayRoute(phone, to: headphones, for: .putOn)
        #expect(machine.claimRefused(phone, holderEpoch: 950) == .lost(.init(accessory: headphones, rule: .putOn, claimed: true)))
        #expect(machine.isHeldElsewhere(phone))
        #expect(machine.heldElsewhere(phone, epoch: 960, routedTo: nil) == .dropRoute)
        #expect(machine.releasedElsewhere(phone) == .none, "no route of this slot's was dropped")
        #expect(!machine.isHeldElsewhere(phone))
        // Never below what a holder's commands carried, which the device would drop.
        #expect(machine.epoch(of: phone, slotEpoch: 57) == 960)
    }

    @Test mutating func wornListingsAreToldAsTheyChangeRemovalsFirst() {
        let laptop = Fixture.laptop
        _ = machine.shared(phone, true, routedTo: nil, kept: true)
        _ = machine.shared(laptop, true, routedTo: nil, kept: true)
        #expect(machine.wornChanged(headphones, listing: [phone]) == [WornListing(accessory: headphones, source: phone, isWorn: true)])
        #expect(machine.wornChanged(headphones, listing: [phone]).isEmpty, "unchanged: nothing")
        #expect(machine.wornChanged(headphones, listing: [laptop]) == [
            WornListing(accessory: headphones, source: phone, isWorn: false),
            WornListing(accessory: headphones, source: laptop, isWorn: true),
        ])
        #expect(machine.wornChanged(headphones, listing: []) == [WornListing(accessory: headphones, source: laptop, isWorn: false)])
    }

    @Test mutating func anUnlistedDeviceDropsWhatWaitedForIt() {
        _ = machine.shared(phone, true, routedTo: nil, kept: true)
        _ = machine.mayRoute(phone, to: headphones, for: .putOn)
        machine.unlisted(phone)
        #expect(machine.claimed(phone, epoch: 5) == .none, "the answer finds nothing waiting")
        #expect(!machine.needsClaim(phone))
    }
}
