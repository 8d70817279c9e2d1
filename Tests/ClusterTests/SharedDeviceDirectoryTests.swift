import AccessoryModel
import Cluster
import Testing

/// A member's view of the shared devices: etcd's watch and its slots' answers in, what each slot served here must
/// hear out, in etcd's order whatever the order they arrive in.
@Suite struct SharedDeviceDirectoryTests {
    typealias N = SharedDeviceDirectory.Notice
    let phone = BluetoothAddress("12:34:56:78:9A:BC")!
    let holder7 = DeviceHolder(slot: 7, wornRevision: 40, accessory: "earbuds")

    func directory(serving slots: [Int]) -> SharedDeviceDirectory {
        var directory = SharedDeviceDirectory()
        for slot in slots { #expect(directory.slotStarted(slot).isEmpty) }
        return directory
    }

    @Test func aSlotServedHereHearsWhenItsDeviceBecomesSharedAndWhoHoldsIt() {
        var d = directory(serving: [3])
        #expect(d.holderChanged(phone, to: holder7, at: 50) == [], "slot 3 does not list the phone yet")
        #expect(d.listersChanged(phone, to: [3, 7], at: 60) == [N(slot: 3, .shared(phone, true)), N(slot: 3, .heldElsewhere(phone, epoch: 50))])
        #expect(d.listersChanged(phone, to: [3, 7], at: 55) == [], "an older revision changes nothing")
        #expect(d.listersChanged(phone, to: nil, at: 70) == [N(slot: 3, .shared(phone, false))])
    }

    @Test func holdersComeAndGo() {
        var d = directory(serving: [3, 7])
        _ = d.listersChanged(phone, to: [3, 7], at: 10)
        #expect(d.holderChanged(phone, to: holder7, at: 20) == [N(slot: 7, .claimed(phone, epoch: 20)), N(slot: 3, .heldElsewhere(phone, epoch: 20))])
        #expect(d.holderChanged(phone, to: nil, at: 30) == [N(slot: 3, .releasedElsewhere(phone))])
        #expect(d.holder(of: phone) == nil)
    }

    @Test func aClaimsAnswerOlderThanTheWatchIsAsGoodAsRefused() {
        var d = directory(serving: [3])
        _ = d.listersChanged(phone, to: [3, 7], at: 10)
        let mine = DeviceHolder(slot: 3, wornRevision: 12, accessory: "headphones")
        // The watch saw slot 7 take the phone (revision 25) before slot 3's answer (revision 21) arrived.
        _ = d.holderChanged(phone, to: holder7, at: 25)
        #expect(d.claimed(phone, by: 3, holder: mine, at: 21) == [N(slot: 3, .claimRefused(phone, holderEpoch: 25))])
        // In order, the answer is the news.
        var e = directory(serving: [3])
        _ = e.listersChanged(phone, to: [3, 7], at: 10)
        #expect(e.claimed(phone, by: 3, holder: mine, at: 21) == [N(slot: 3, .claimed(phone, epoch: 21))])
        #expect(e.holderChanged(phone, to: mine, at: 21) == [], "the watch's copy of it changes nothing")
    }

    @Test func aRefusalFollowedByANewerReleaseSaysBoth() {
        var d = directory(serving: [3])
        _ = d.listersChanged(phone, to: [3, 7], at: 10)
        _ = d.holderChanged(phone, to: nil, at: 40)
        #expect(d.refused(phone, to: 3, holder: holder7, at: 35)
            == [N(slot: 3, .claimRefused(phone, holderEpoch: 40)), N(slot: 3, .releasedElsewhere(phone))])
    }

    @Test func aListingAlwaysAnswersTheSlotThatAsked() {
        var d = directory(serving: [3, 7])
        #expect(d.listed(phone, by: 3, listers: [3], at: 5) == [N(slot: 3, .listed(phone, shared: false))])
        #expect(d.listed(phone, by: 7, listers: [3, 7], at: 6) == [N(slot: 3, .shared(phone, true)), N(slot: 7, .listed(phone, shared: true))])
        // An answer older than what the watch said since: the slot hears the newer.
        _ = d.listersChanged(phone, to: nil, at: 9)
        #expect(d.listed(phone, by: 3, listers: [3, 7], at: 8) == [N(slot: 3, .listed(phone, shared: false))])
    }

    @Test func aSlotStartedHereHearsItsSharedDevicesAndTheirHolders() {
        var d = directory(serving: [])
        _ = d.listersChanged(phone, to: [3, 7], at: 10)
        _ = d.holderChanged(phone, to: holder7, at: 20)
        #expect(d.slotStarted(3) == [N(slot: 3, .shared(phone, true)), N(slot: 3, .heldElsewhere(phone, epoch: 20))])
        d.slotStopped(3)
        #expect(d.holderChanged(phone, to: nil, at: 30) == [], "a slot no longer served hears nothing")
    }

    @Test func aFreshReadTellsWhatTheWatchMissed() {
        var d = directory(serving: [3])
        _ = d.listersChanged(phone, to: [3, 7], at: 10)
        _ = d.holderChanged(phone, to: holder7, at: 20)
        // While the watch was broken, slot 7 let the phone go.
        #expect(d.loaded(shared: [phone: ([3, 7], 10)], holders: [:], at: 90) == [N(slot: 3, .releasedElsewhere(phone))])
        #expect(d.loaded(shared: [:], holders: [:], at: 95) == [N(slot: 3, .shared(phone, false))])
    }

    @Test func keysReadAsTheyAreWritten() {
        let keys = ClusterKeys(cluster: "home")
        #expect(keys.subject(of: keys.shared(phone)) == .shared(phone))
        #expect(keys.subject(of: keys.holder(phone)) == .holder(phone))
        #expect(keys.subject(of: keys.listers(phone)) == nil, "lister keys are outside what members read")
        #expect(DeviceHolder(parsing: holder7.description) == holder7)
        #expect(DeviceHolder(parsing: "7/x/earbuds") == nil)
        #expect(ListerSlots(parsing: "7,3,x").slots == [3, 7])
        #expect(ListerSlots([7, 3]).description == "3,7")
    }
}
