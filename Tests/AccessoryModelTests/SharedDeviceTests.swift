import AccessoryModel
import Testing

/// A cluster's slot and the playing devices that accessories of other slots list too (docs/scale-out.md, "Shared
/// devices"): the engine routes a shared device only while the slot holds it, asks for it where a rule would route
/// it, and runs the rule again when etcd answered. Without etcd: the answers are the test's.
@Suite struct SharedDeviceTests {
    typealias I = RoutingHarness.Issued
    let phone = Fixture.phone
    let laptop = Fixture.laptop
    let headphones = Fixture.headphones
    let earbuds = Fixture.earbuds

    /// A slot of epoch 100 whose headphones list the phone and the laptop, registered off head.
    func slot(sharing shared: [BluetoothAddress] = []) -> RoutingHarness {
        var h = RoutingHarness(epoch: 100)
        for source in [phone, laptop] { h.engine.deviceListed(source) }
        h.register(headphones, placement: .offHead, sources: [phone, laptop])
        for source in [phone, laptop] { h.shared(.shared(source, shared.contains(source))) }
        return h
    }

    @Test func aNewlyListedDeviceWaitsUntilTheShellSaysWhetherItIsShared() {
        var h = RoutingHarness(epoch: 100)
        h.source(phone, .media)
        h.engine.deviceListed(phone)
        #expect(h.register(headphones, placement: .onHead, sources: [phone]) == [], "not routed while unconfirmed")
        #expect(h.last.claims.isEmpty, "nothing is claimed before the device is known to be shared")
        #expect(h.shared(.shared(phone, false)) == [.route(phone, headphones, .putOn)])
        #expect(h.last.commands.first?.epoch == 100, "an unshared device's commands carry the slot's epoch")
        #expect(h.last.claims.isEmpty && h.last.releases.isEmpty)
    }

    @Test func aPutOnClaimsASharedDeviceTakingOverThenRoutesItWithTheHoldersEpoch() {
        var h = slot(sharing: [phone])
        h.source(phone, .media)
        #expect(h.place(headphones, .onHead) == [], "no command before the slot holds the phone")
        #expect(h.last.worn == [WornListing(accessory: headphones, source: phone, isWorn: true)], "the put-on is ordered in etcd before the claim")
        #expect(h.last.claims == [DeviceClaim(source: phone, accessory: headphones, kind: .takeOver)])
        #expect(h.engine.routedSource(for: headphones) == nil)

        #expect(h.shared(.claimed(phone, epoch: 512)) == [.route(phone, headphones, .putOn)])
        #expect(h.last.commands.first?.epoch == 512, "the holder key's revision is the device's epoch")
        #expect(h.last.rerouted == [headphones])
        #expect(h.engine.heldDevices == [phone: 512])

        // Taken off: the PAUSE carries the holder's epoch, then the phone is let go.
        #expect(h.place(headphones, .offHead) == [.pause(phone, headphones, .takenOff)])
        #expect(h.last.commands.first?.epoch == 512)
        #expect(h.last.releases == [DeviceRelease(source: phone, epoch: 512)])
        #expect(h.engine.heldDevices.isEmpty)

        // Back on within the window: claimed again, routed and resumed with the new epoch.
        h.place(headphones, .onHead)
        #expect(h.last.claims == [DeviceClaim(source: phone, accessory: headphones, kind: .takeOver)])
        #expect(h.shared(.claimed(phone, epoch: 530)) == [.route(phone, headphones, .putOn), .resume(phone, headphones, .putOn)])
        #expect(h.last.commands.allSatisfy { $0.epoch == 530 })
    }

    @Test func anActivatedSharedDeviceIsClaimedWithoutTakingOverAndARefusalSendsNothing() {
        var h = slot(sharing: [phone])
        h.place(headphones, .onHead)
        #expect(h.source(phone, .media) == [])
        #expect(h.last.claims == [DeviceClaim(source: phone, accessory: headphones, kind: .mostRecentlyWorn)])
        // An accessory of another slot, put on later, holds it.
        #expect(h.shared(.claimRefused(phone, holderEpoch: 640)) == [])
        #expect(h.engine.routedSource(for: headphones) == nil)
        // Held elsewhere, it is routed elsewhere: it playing again here changes nothing.
        #expect(h.source(phone, .call) == [])
        #expect(h.last.claims.isEmpty)
        // Let go there, it is free again: becoming active routes it (rule 6), through a claim.
        h.shared(.releasedElsewhere(phone))
        h.source(phone, .idle)
        h.source(phone, .media)
        #expect(h.last.claims == [DeviceClaim(source: phone, accessory: headphones, kind: .mostRecentlyWorn)])
        #expect(h.shared(.claimed(phone, epoch: 700)) == [.route(phone, headphones, .sourceActivated)])
        #expect(h.last.commands.first?.epoch == 700)
    }

    /// The device's own report ends a holding elsewhere. SharedDeviceArbitrationTests under load: the holder paused
    /// the device (its accessory was taken off) and let go of it, but etcd's news of the release reached this slot
    /// after the device played again, and nothing ran rule 6 then; the device stayed unrouted.
    @Test func aDeviceItsHolderUnroutedIsFreeFromItsReportOnAndPlayingAgainRoutesIt() {
        var h = slot(sharing: [phone])
        h.place(headphones, .onHead)
        h.shared(.heldElsewhere(phone, epoch: 640))
        // Routed to nobody, but before the holder's first command (an older epoch): the holder's route is on its way.
        h.source(phone, .idle, sequence: 1, applied: .init(epoch: 600, sequence: 9))
        #expect(h.source(phone, .media, sequence: 2, applied: .init(epoch: 600, sequence: 9)) == [])
        #expect(h.last.claims.isEmpty, "held elsewhere, it is routed elsewhere")
        let elsewhere = AccessoryID("elsewhere")!
        h.source(phone, .media, sequence: 3, routedTo: elsewhere, applied: .init(epoch: 640, sequence: 1))
        // The holder paused it, at its epoch: from this report on the phone is free here.
        #expect(h.source(phone, .idle, sequence: 4, applied: .init(epoch: 640, sequence: 2)) == [])
        #expect(h.last.claims.isEmpty, "idle, it is not routed by anyone")
        #expect(h.source(phone, .media, sequence: 5, applied: .init(epoch: 640, sequence: 2)) == [])
        #expect(h.last.claims == [DeviceClaim(source: phone, accessory: headphones, kind: .mostRecentlyWorn)])
        #expect(h.shared(.claimed(phone, epoch: 700)) == [.route(phone, headphones, .sourceActivated)])
        #expect(h.last.commands.first?.epoch == 700)
        // etcd's news of the release, late, changes nothing.
        #expect(h.shared(.releasedElsewhere(phone)) == [])
        #expect(h.engine.routedSource(for: headphones) == phone)
    }

    @Test func aRefusedPutOnRoutesTheBestOtherFreeCandidate() {
        var h = slot(sharing: [phone])
        h.source(laptop, .media)
        h.advance(.seconds(1))
        h.source(phone, .media)
        // The phone is the most recently active: the put-on wants it, and claims it.
        #expect(h.place(headphones, .onHead) == [])
        #expect(h.last.claims.map(\.source) == [phone])
        #expect(h.shared(.claimRefused(phone, holderEpoch: 800)) == [.route(laptop, headphones, .sourceActivated)])
        #expect(h.last.commands.first?.epoch == 100, "the laptop is not shared: the slot's epoch")
    }

    @Test func aDeviceTakenByAnotherSlotLeavesWithoutACommandAndItsEpochNeverGoesBack() {
        var h = slot(sharing: [phone])
        h.source(phone, .media)
        h.place(headphones, .onHead)
        h.shared(.claimed(phone, epoch: 512))
        #expect(h.engine.routedSource(for: headphones) == phone)
        // Another slot's accessory was put on: it takes the phone, as another accessory's put-on does in one bridge.
        #expect(h.shared(.heldElsewhere(phone, epoch: 900)) == [])
        #expect(h.last.rerouted == [headphones])
        #expect(h.engine.routedSource(for: headphones) == nil)
        #expect(h.engine.heldDevices.isEmpty)
        // The other slot's ROUTE reached the phone.
        h.source(phone, .media, sequence: 1, routedTo: AccessoryID("earbuds")!, applied: CommandOrder(epoch: 900, sequence: 1))
        // No longer shared (the other slot's accessory forgot it): routed by the slot alone again, with an epoch
        // never below what the phone last applied (900), or it would drop the command.
        h.shared(.releasedElsewhere(phone))
        h.shared(.shared(phone, false))
        h.place(headphones, .offHead)
        #expect(h.place(headphones, .onHead) == [.route(phone, headphones, .putOn)])
        #expect(h.last.claims.isEmpty)
        #expect(h.last.commands.first?.epoch == 900)
    }

    @Test func aRouteTheSlotHadIsClaimedWhenTheDeviceBecomesSharedAndDroppedIfRefused() {
        var h = slot()
        h.source(phone, .media)
        #expect(h.place(headphones, .onHead) == [.route(phone, headphones, .putOn)])
        #expect(h.shared(.shared(phone, true)) == [])
        #expect(h.last.worn == [WornListing(accessory: headphones, source: phone, isWorn: true)], "listed as worn once the device is shared")
        #expect(h.last.claims == [DeviceClaim(source: phone, accessory: headphones, kind: .ifFree)])
        #expect(h.engine.routedSource(for: headphones) == phone, "the route stands while the claim is on its way")
        #expect(h.shared(.claimRefused(phone, holderEpoch: 300)) == [], "the holder's commands move the device")
        #expect(h.engine.routedSource(for: headphones) == nil)
        #expect(h.last.rerouted == [headphones])
    }

    @Test func aRouteKeptByItsClaimIsLetGoWhenTheDeviceIsNoLongerShared() {
        var h = slot()
        h.source(phone, .media)
        h.place(headphones, .onHead)
        h.shared(.shared(phone, true))
        #expect(h.shared(.claimed(phone, epoch: 410)) == [], "the route was in force: nothing to send")
        #expect(h.engine.heldDevices == [phone: 410])
        h.shared(.shared(phone, false))
        #expect(h.last.releases == [DeviceRelease(source: phone, epoch: 410)])
        #expect(h.engine.routedSource(for: headphones) == phone)
        // Its later commands keep the holder's epoch as their floor.
        #expect(h.place(headphones, .offHead) == [.pause(phone, headphones, .takenOff)])
        #expect(h.last.commands.first?.epoch == 410)
    }

    @Test func twoAccessoriesOfOneSlotShareTheHoldingAndAPutOnClaimCoversAWaitingActivation() {
        var h = slot(sharing: [phone])
        h.register(earbuds, placement: .inEar, sources: [phone])
        h.source(phone, .media)
        #expect(h.last.claims == [DeviceClaim(source: phone, accessory: earbuds, kind: .mostRecentlyWorn)])
        // The headphones are put on while that claim is on its way: a put-on asks more (it takes over).
        h.place(headphones, .onHead)
        #expect(h.last.claims == [DeviceClaim(source: phone, accessory: headphones, kind: .takeOver)])
        // The first answer runs the latest decision: the put-on's.
        #expect(h.shared(.claimed(phone, epoch: 1000)) == [.route(phone, headphones, .putOn)])
        #expect(h.shared(.claimed(phone, epoch: 1001)) == [], "the second claim's answer changes nothing")
        #expect(h.engine.heldDevices == [phone: 1001])
        // Within the slot, moving the phone between its own accessories needs no claim.
        h.place(headphones, .offHead)
        #expect(h.last.releases == [DeviceRelease(source: phone, epoch: 1001)])
    }

    @Test func wornListingsFollowPutOnsTakeOffsListingsAndSharing() {
        typealias W = WornListing
        var h = slot(sharing: [phone])
        h.place(headphones, .onHead)
        #expect(h.last.worn == [W(accessory: headphones, source: phone, isWorn: true)])
        h.place(headphones, .overTheEar)
        #expect(h.last.worn == [], "still worn: nothing to tell")
        h.place(headphones, .offHead)
        #expect(h.last.worn == [W(accessory: headphones, source: phone, isWorn: false)])
        h.place(headphones, .onHead)
        // The phone is unlisted while worn (the bridge says so before the change), the laptop becomes shared.
        h.engine.deviceUnlisted(phone)
        h.connect(headphones, [laptop])
        #expect(h.last.worn == [W(accessory: headphones, source: phone, isWorn: false)])
        h.shared(.shared(laptop, true))
        #expect(h.last.worn == [W(accessory: headphones, source: laptop, isWorn: true)])
        h.shared(.shared(laptop, false))
        #expect(h.last.worn == [W(accessory: headphones, source: laptop, isWorn: false)])
    }

    @Test func aWithdrawnClaimDropsTheDecisionAndLeavesTheDeviceFree() {
        var h = slot(sharing: [phone])
        h.place(headphones, .onHead)
        h.source(phone, .media)
        #expect(h.last.claims == [DeviceClaim(source: phone, accessory: headphones, kind: .mostRecentlyWorn)])
        // Another slot's accessory was put on later: this slot stands back, and sends nothing.
        #expect(h.shared(.claimWithdrawn(phone)) == [])
        #expect(h.last.releases.isEmpty && h.last.claims.isEmpty)
        // Free to this slot's rules still (not held elsewhere): a put-on here takes it, as in one bridge.
        h.place(headphones, .offHead)
        h.place(headphones, .onHead)
        #expect(h.last.claims == [DeviceClaim(source: phone, accessory: headphones, kind: .takeOver)])
    }

    /// The stand-back's other side: the slot whose listing was newest may not claim (its accessory was taken off and
    /// the deletion is not in etcd yet; its member is paused). Rule 6 looks again a second later, and only then.
    @Test func ruleSixLooksAgainASecondAfterItStoodBackUnlessTheDeviceWasTakenOrStopped() {
        let claim = DeviceClaim(source: phone, accessory: headphones, kind: .mostRecentlyWorn)
        func withdrawn() -> RoutingHarness {
            var h = slot(sharing: [phone])
            h.place(headphones, .onHead)
            h.source(phone, .media)
            h.shared(.claimWithdrawn(phone))
            return h
        }
        var h = withdrawn()
        #expect(h.engine.nextDeadline == h.now.advanced(byMilliseconds: 1_000))
        h.advance(.milliseconds(999))
        #expect(h.tick() == [] && h.last.claims.isEmpty)
        h.advance(.milliseconds(1))
        #expect(h.tick() == [], "nothing routed before the slot holds it")
        #expect(h.last.claims == [claim])
        #expect(h.engine.nextDeadline == nil, "once")
        // Held now: routed, as rule 6 would have.
        #expect(h.shared(.claimed(phone, epoch: 700)) == [.route(phone, headphones, .sourceActivated)])

        // Another slot took it meanwhile: nothing to look at again.
        h = withdrawn()
        h.shared(.heldElsewhere(phone, epoch: 700))
        #expect(h.engine.nextDeadline == nil)
        h.advance(.seconds(1))
        #expect(h.tick() == [] && h.last.claims.isEmpty)

        // The device stopped playing: rule 6 has nothing to route.
        h = withdrawn()
        h.source(phone, .idle)
        h.advance(.seconds(1))
        #expect(h.tick() == [] && h.last.claims.isEmpty)
    }

    /// Another slot's put-on took the phone from this slot's route, and its accessory came off before the answer:
    /// that slot routes nothing and lets the phone go without a command, while it still plays on these headphones.
    /// One bridge would have routed it there and paused it; here nobody would pause it when the headphones come off.
    @Test func aRouteDroppedForAHolderThatLetGoWithoutACommandIsClaimedBack() throws {
        func dropped() throws -> (RoutingHarness, CommandOrder) {
            var h = slot(sharing: [phone])
            h.source(phone, .media)
            h.place(headphones, .inEar)
            #expect(h.shared(.claimed(phone, epoch: 500)) == [.route(phone, headphones, .putOn)])
            let route = try #require(h.log.last)
            h.source(phone, .media, sequence: 1, routedTo: headphones, applied: route.order)
            #expect(h.shared(.heldElsewhere(phone, epoch: 600)) == [], "its route ends without a command")
            return (h, route.order)
        }
        var (h, order) = try dropped()
        // Its reports of the headphones are older than the holder's epoch: not taken as a route.
        h.source(phone, .media, sequence: 2, routedTo: headphones, applied: order)
        #expect(h.engine.routedSource(for: headphones) == nil)
        #expect(h.shared(.releasedElsewhere(phone)) == [])
        #expect(h.last.claims == [DeviceClaim(source: phone, accessory: headphones, kind: .ifFree)])
        #expect(h.shared(.claimed(phone, epoch: 700)) == [.route(phone, headphones, .sourceActivated)])
        #expect(h.last.commands.allSatisfy { $0.epoch == 700 })
        #expect(h.place(headphones, .offHead) == [.pause(phone, headphones, .takenOff)], "and paused when taken off")

        // The holder's command reached the phone (routed elsewhere, then paused off it): nothing to claim back.
        (h, _) = try dropped()
        h.source(phone, .idle, sequence: 2, routedTo: nil, applied: CommandOrder(epoch: 600, sequence: 2))
        h.source(phone, .media, sequence: 3)
        h.shared(.releasedElsewhere(phone))
        #expect(!h.last.claims.contains(DeviceClaim(source: phone, accessory: headphones, kind: .ifFree)))

        // The phone is on another accessory now (the person chose it): nothing to claim back either.
        (h, order) = try dropped()
        h.source(phone, .media, sequence: 2, routedTo: AccessoryID("speaker")!, applied: order)
        #expect(h.shared(.releasedElsewhere(phone)) == [] && h.last.claims.isEmpty)
    }

    @Test func aDeviceConfirmedSharedBeforeItsAccessoryTakesPartIsClaimedOnceItDoes() {
        var h = RoutingHarness(epoch: 100)
        h.source(phone, .media)
        h.engine.deviceListed(phone)
        // Paired, not registered yet: the engine does not keep it, and the shell says the phone is shared meanwhile.
        h.change(
            RoutingAccessory(
                id: headphones, registration: .paired, capabilities: .all, placement: .onHead, sources: [phone]))
        h.shared(.shared(phone, true))
        #expect(h.registration(headphones, .registered) == [], "not routed before the slot holds the phone")
        #expect(h.last.claims == [DeviceClaim(source: phone, accessory: headphones, kind: .takeOver)])
    }

    /// The phone (shared) plays on the headphones, which this slot holds; a call on the laptop displaces it (rule 11
    /// remembers it), and the phone says it paused; then the call ends.
    func callEndsAfterDisplacingASharedDevice() throws -> RoutingHarness {
        var h = slot(sharing: [phone])
        h.source(phone, .media)
        h.place(headphones, .inEar)
        h.shared(.claimed(phone, epoch: 500))
        #expect(h.source(laptop, .call) == [
            .pause(phone, headphones, .sourceActivated), .route(laptop, headphones, .sourceActivated),
        ])
        #expect(h.last.releases == [DeviceRelease(source: phone, epoch: 500)], "paused off it: the phone is let go")
        let pause = try #require(h.log.last { $0.action == .pause })
        h.source(phone, .idle)
        h.engine.sourceReported(
            SourceReport(activity: .idle, lastCommandSequence: pause.sequence, lastCommandEpoch: pause.epoch),
            from: phone, at: h.now)
        #expect(h.source(laptop, .idle) == [.release(laptop, headphones, .interruptionEnded)])
        #expect(h.last.claims == [DeviceClaim(source: phone, accessory: headphones, kind: .ifFree)])
        return h
    }

    @Test func whatACallDisplacedComesBackOnceTheSlotHoldsItAgain() throws {
        var h = try callEndsAfterDisplacingASharedDevice()
        #expect(h.shared(.claimed(phone, epoch: 600)) == [
            .route(phone, headphones, .interruptionEnded), .resume(phone, headphones, .interruptionEnded),
        ])
        #expect(h.last.commands.allSatisfy { $0.epoch == 600 })
    }

    @Test func whatACallDisplacedStaysWhereAnotherSlotTookIt() throws {
        var h = try callEndsAfterDisplacingASharedDevice()
        #expect(h.shared(.claimRefused(phone, holderEpoch: 650)) == [])
        #expect(h.engine.routedSource(for: headphones) == nil)
    }
}
