import AccessoryModel
import Cluster
import Testing
import TestSupport

/// The cluster's state machine as chains of events → actions, without etcd or a clock.
@Suite struct ClusterStateMachineTests {
    typealias Action = ClusterStateMachine.Action
    static let t0 = ContinuousClock.now

    var machine = ClusterStateMachine(member: "a", slotCount: 12)
    var now = t0

    mutating func at(_ offset: Duration) -> ContinuousClock.Instant {
        now = Self.t0 + offset
        return now
    }

    /// Granted, registered and loaded with `members`; returns the claims it made.
    mutating func join(members: Set<String> = ["a"], claims: [Int: ClusterStateMachine.Claim] = [:]) -> [Int] {
        #expect(machine.start(at: now) == [.grantLease(ttl: .seconds(2))])
        let granted = machine.leaseGranted(7, sentAt: now, at: now)
        #expect(granted == [.fence(until: now + .milliseconds(1500)), .register(lease: 7, replacing: nil)])
        #expect(machine.registered(at: now) == [.load])
        return machine.loaded(members: members, claims: claims, at: now).compactMap {
            if case .claim(let slot, let lease) = $0 { #expect(lease == 7); return slot } else { return nil }
        }
    }

    static func slots(of member: String, among members: Set<String>) -> [Int] {
        Rendezvous.slots(of: member, among: members, count: 12).sorted()
    }

    @Test mutating func aLoneMemberClaimsEverySlotThenServesWhatItWon() {
        let claims = join()
        #expect(claims == Array(0..<12))
        #expect(machine.claimed(3, epoch: 40, at: now) == [.startSlot(slot: 3, epoch: 40)])
        #expect(machine.claimRefused(4, holder: "b", epoch: 39, at: now) == [])
        #expect(machine.holdings[4] == nil && machine.claims[4] == .init(holder: "b", epoch: 39))
        #expect(machine.slotStarted(3, at: now) == [])
        #expect(machine.serving == [3: 40] && machine.servingCount == 1)
        #expect(machine.notReadyBecause.first?.contains("taking over") == true, "slots still claiming")
    }

    @Test mutating func itClaimsOnlyItsRendezvousShareAndNothingHeld() {
        let members: Set = ["a", "b", "c"]
        let mine = Self.slots(of: "a", among: members)
        let held = mine.first!
        let claims = join(members: members, claims: [held: .init(holder: "b", epoch: 5)])
        #expect(claims == mine.filter { $0 != held })
        // The holder's lease ends: etcd deletes its claim, and it is claimed.
        #expect(machine.slotReleased(held, revision: 6, at: now) == [.claim(slot: held, lease: 7)])
    }

    /// The claim's refusal and the watch's news travel apart: a refusal that names a claim the watch already said was
    /// deleted is out of date, and the slot is claimed again. (Seen once under `make test-stress`: a member claimed a
    /// slot another had just claimed and was handing over; the hand-over's delete came first, then the refusal, and the
    /// slot stayed unserved, for no later change came to say it was free.)
    @Test mutating func aRefusalThatNamesAClaimDeletedSinceLeavesTheSlotFree() {
        let members: Set = ["a", "b"]
        let slot = Self.slots(of: "a", among: members).first!
        #expect(join(members: members).contains(slot))
        // b claimed it just before (it read the cluster without a), and hands it over: its claim, then its delete.
        #expect(machine.slotClaimed(slot, by: "b", epoch: 13, at: now) == [])
        #expect(machine.slotReleased(slot, revision: 17, at: now) == [], "a's claim is on its way")
        // Then a's claim's answer: refused by b's claim of revision 13, which no longer exists.
        #expect(machine.claimRefused(slot, holder: "b", epoch: 13, at: now) == [.claim(slot: slot, lease: 7)])
        #expect(machine.claims[slot] == nil)

        // A refusal by a claim made after the last delete still holds the slot.
        #expect(machine.claimRefused(slot, holder: "b", epoch: 18, at: now) == [])
        #expect(machine.claims[slot] == .init(holder: "b", epoch: 18))
    }

    @Test mutating func aJoiningMemberTakesItsSlotsByHandoverStopThenRelease() {
        _ = join()
        for slot in 0..<12 {
            _ = machine.claimed(slot, epoch: UInt64(100 + slot), at: now)
            _ = machine.slotStarted(slot, at: now)
        }
        let moving = Self.slots(of: "b", among: ["a", "b"])
        #expect(!moving.isEmpty)
        let actions = machine.memberJoined("b", at: now)
        #expect(actions == moving.flatMap {
            [Action.stopSlot(slot: $0, reason: .handover), .release(slot: $0, epoch: UInt64(100 + $0))]
        })
        // Released: nothing claimed again (the slot is b's), and b's claim is seen.
        #expect(machine.released(moving[0], at: now) == [])
        #expect(machine.slotClaimed(moving[0], by: "b", epoch: 300, at: now) == [])
        // b leaves: its slots come back.
        let back = machine.memberLeft("b", at: now)
        #expect(back.allSatisfy { if case .claim = $0 { true } else { false } })
    }

    @Test mutating func keepAlivesMoveTheFenceAndItsTimeUpStopsEverySlot() {
        _ = join()
        _ = machine.claimed(0, epoch: 10, at: now)
        _ = machine.slotStarted(0, at: now)
        // Keep-alives are due every 500 ms.
        #expect(machine.tick(at: at(.milliseconds(400))) == [])
        #expect(machine.tick(at: at(.milliseconds(500))) == [.keepAlive(lease: 7)])
        #expect(machine.tick(at: at(.milliseconds(600))) == [], "one in flight at a time")
        let sent = Self.t0 + .milliseconds(500)
        #expect(machine.keepAliveAnswered(alive: true, sentAt: sent, at: at(.milliseconds(510)))
            == [.fence(until: sent + .milliseconds(1500))])
        // etcd stops answering: the slots go on until the fence, 1.5 s after the last acknowledged send.
        #expect(machine.tick(at: at(.milliseconds(1000))) == [.keepAlive(lease: 7)])
        #expect(machine.etcdFailed(at: at(.milliseconds(1900))) == [])
        #expect(machine.serving == [0: 10])
        let fenced = machine.tick(at: at(.milliseconds(2000)))
        #expect(fenced.prefix(3) == [.stopSlot(slot: 0, reason: .fenced), .fence(until: nil), .grantLease(ttl: .seconds(2))])
        #expect(machine.serving.isEmpty && machine.fenceUntil == nil)
        #expect(machine.notReadyBecause == ["no etcd lease: is etcd reachable?"])
        // etcd is back: a new lease, and the one given up is revoked (its claims go at once) before the member
        // registers again.
        #expect(machine.leaseGranted(8, sentAt: now, at: now).contains(.register(lease: 8, replacing: 7)))
    }

    @Test mutating func anExpiredLeaseStopsEverySlotAndStartsOver() {
        _ = join()
        _ = machine.claimed(2, epoch: 10, at: now)
        let actions = machine.keepAliveAnswered(alive: false, sentAt: now, at: now)
        #expect(actions == [.stopSlot(slot: 2, reason: .fenced), .fence(until: nil), .grantLease(ttl: .seconds(2))])
        // Expired: nothing left to revoke.
        #expect(machine.leaseGranted(8, sentAt: now, at: now).contains(.register(lease: 8, replacing: nil)))
    }

    @Test mutating func aClaimThatLandsAfterTheFenceIsReleasedAtOnce() {
        _ = join()
        _ = machine.tick(at: at(.seconds(2)))  // fenced: every holding dropped
        #expect(machine.claimed(5, epoch: 50, at: now) == [.release(slot: 5, epoch: 50)])
    }

    @Test mutating func shutdownStopsEverySlotThenRevokes() {
        _ = join()
        _ = machine.claimed(1, epoch: 11, at: now)
        _ = machine.claimed(4, epoch: 14, at: now)
        #expect(machine.shutdown(at: now) == [
            .stopSlot(slot: 1, reason: .shutdown), .stopSlot(slot: 4, reason: .shutdown), .fence(until: nil),
            .revokeLease(lease: 7), .finish,
        ])
        #expect(machine.memberJoined("b", at: now) == [], "a stopped member claims nothing")
    }

    @Test mutating func failedCallsAreTriedAgain() {
        #expect(machine.start(at: now) == [.grantLease(ttl: .seconds(2))])
        // The retry policy's first pause, then twice as long while etcd keeps failing.
        #expect(machine.etcdFailed(at: now) == [])
        #expect(machine.tick(at: at(.milliseconds(99))) == [])
        #expect(machine.tick(at: at(.milliseconds(100))) == [.grantLease(ttl: .seconds(2))])
        #expect(machine.etcdFailed(at: now) == [])
        #expect(machine.tick(at: at(.milliseconds(299))) == [])
        #expect(machine.tick(at: at(.milliseconds(300))) == [.grantLease(ttl: .seconds(2))])
        _ = machine.leaseGranted(7, sentAt: now, at: now)
        #expect(machine.etcdFailed(at: now) == [])
        #expect(machine.tick(at: at(.milliseconds(500))).contains(.register(lease: 7, replacing: nil)))
        // A claim etcd did not answer is made again.
        _ = machine.registered(at: now)
        _ = machine.loaded(members: ["a"], claims: [:], at: now)
        #expect(machine.claimFailed(6, at: now) == [])
        #expect(machine.tick(at: at(.milliseconds(800))).contains(.claim(slot: 6, lease: 7)))
    }

    @Test mutating func aGrantThatComesLateIsRevoked() {
        _ = join()
        #expect(machine.leaseGranted(99, sentAt: now, at: now) == [.revokeLease(lease: 99)])
    }

    @Test mutating func aSlotWhoseBridgeEndedIsStoppedAndStartedAgainAfterTheRetryPolicysPause() {
        _ = join()
        let retry = machine.policy.retry
        #expect(machine.claimed(2, epoch: 20, at: now) == [.startSlot(slot: 2, epoch: 20)])
        _ = machine.slotStarted(2, at: now)
        #expect(machine.slotEnded(2, epoch: 20, at: now) == [.stopSlot(slot: 2, reason: .failed)])
        #expect(machine.slotEnded(2, epoch: 20, at: now) == [], "once")
        #expect(machine.slotEnded(3, epoch: 99, at: now) == [], "not a slot it runs")
        #expect(machine.nextDeadline! <= now + retry.delay(after: 1))
        let start = now
        #expect(!machine.tick(at: at(retry.delay(after: 1) - .milliseconds(1))).contains(.startSlot(slot: 2, epoch: 20)))
        #expect(machine.tick(at: start + retry.delay(after: 1)).contains(.startSlot(slot: 2, epoch: 20)), "same claim")
        // Ended again before it served: it waits twice as long.
        #expect(machine.slotEnded(2, epoch: 20, at: now) == [.stopSlot(slot: 2, reason: .failed)])
        let again = now
        #expect(!machine.tick(at: again + retry.delay(after: 1)).contains(.startSlot(slot: 2, epoch: 20)))
        #expect(machine.tick(at: again + retry.delay(after: 2)).contains(.startSlot(slot: 2, epoch: 20)))
    }

    @Test mutating func aSlotWaitingToStartAgainIsHandedOverByReleasingItsClaim() {
        _ = join()
        for slot in 0..<12 {
            _ = machine.claimed(slot, epoch: UInt64(100 + slot), at: now)
            _ = machine.slotStarted(slot, at: now)
        }
        let moving = Self.slots(of: "b", among: ["a", "b"])
        _ = machine.slotEnded(moving[0], epoch: UInt64(100 + moving[0]), at: now)
        let actions = machine.memberJoined("b", at: now)
        #expect(actions.contains(.release(slot: moving[0], epoch: UInt64(100 + moving[0]))))
        #expect(!actions.contains(.stopSlot(slot: moving[0], reason: .handover)), "stopped already")
        #expect(!machine.tick(at: at(.milliseconds(200))).contains { if case .startSlot = $0 { true } else { false } })
    }

    /// A member whose lease lapsed (etcd restarting) comes back with a new one: another member saw it leave, claimed
    /// one of its slots, and saw it join again before etcd answered. The claim that lands is let go unstarted, so the
    /// slot goes back to its owner (found by the cluster suite under load: the slot stayed with the claimer for good).
    @Test mutating func aClaimThatLandsAfterItsOwnerCameBackIsReleasedUnstarted() {
        let members: Set = ["a", "b"]
        _ = join(members: members)
        let theirs = Self.slots(of: "b", among: members)[0]
        let claims = machine.memberLeft("b", at: now)
        #expect(claims.contains(.claim(slot: theirs, lease: 7)))
        #expect(machine.memberJoined("b", at: now) == [], "a claim on its way is not withdrawn")
        #expect(machine.claimed(theirs, epoch: 50, at: now) == [.release(slot: theirs, epoch: 50)])
        #expect(machine.serving[theirs] == nil)
        #expect(machine.released(theirs, at: now) == [])
        #expect(machine.holdings[theirs] == nil && machine.claims[theirs] == nil)
        // Its owner's claim, then, is only watched.
        #expect(machine.slotClaimed(theirs, by: "b", epoch: 51, at: now) == [])
    }

    /// A member alone in a cluster of many slots (or taking a dead member's share over) takes them up a few at a time:
    /// each slot that serves, is refused, or fails to be claimed lets the next in, in slot order.
    @Test mutating func slotsAreTakenUpAFewAtATime() {
        var policy = ClusterStateMachine.Policy()
        policy.concurrentTakeovers = 3
        machine = ClusterStateMachine(member: "a", slotCount: 100, policy: policy)
        #expect(join() == [0, 1, 2])
        #expect(machine.notReadyBecause == ["taking over or handing over slots [0, 1, 2]", "97 slots waiting their turn to be taken over"])
        // Started is still taken up; serving lets the next in.
        #expect(machine.claimed(0, epoch: 10, at: now) == [.startSlot(slot: 0, epoch: 10)])
        #expect(machine.slotStarted(0, at: now) == [.claim(slot: 3, lease: 7)])
        // Held by another: the next.
        #expect(machine.claimRefused(1, holder: "b", epoch: 9, at: now) == [.claim(slot: 4, lease: 7)])
        // etcd did not answer: its room waits for the retry, which claims it again first.
        #expect(machine.claimFailed(2, at: now) == [])
        #expect(machine.tick(at: at(.milliseconds(100))).filter { if case .claim = $0 { true } else { false } }
            == [.claim(slot: 2, lease: 7)])
        // Nothing more while three are taken up.
        #expect(machine.slotReleased(1, revision: 30, at: now) == [], "its holder let go, but there is no room")
        #expect(machine.claimed(2, epoch: 12, at: now) + machine.slotStarted(2, at: now)
            == [.startSlot(slot: 2, epoch: 12), .claim(slot: 1, lease: 7)])
        // A served slot whose bridge ended is taken up again until it serves: the room it takes is not given to a
        // claim meanwhile, and it starts when due.
        #expect(machine.slotEnded(0, epoch: 10, at: now) == [.stopSlot(slot: 0, reason: .failed)])
        #expect(machine.claimed(3, epoch: 13, at: now) + machine.slotStarted(3, at: now) == [.startSlot(slot: 3, epoch: 13)])
        #expect(machine.tick(at: now + machine.policy.retry.delay(after: 1)).contains(.startSlot(slot: 0, epoch: 10)))
        #expect(machine.slotStarted(0, at: now) == [.claim(slot: 5, lease: 7)])
        #expect(machine.notReadyBecause.last == "94 slots waiting their turn to be taken over")
    }

    /// However many slots a member owns, it never has more than its pacing taken up, and in the end serves them all.
    @Test func everySlotIsServedInTheEndAndNeverMoreThanThePacingAtOnce() async throws {
        let suite = self
        // CPU-bound (1,024 slots taken up one by one): off the cooperative pool.
        try await inTheBackground {
            var suite = suite
            suite.servesEverySlotInTheEndNeverMoreThanThePacingAtOnce()
        }
    }

    mutating func servesEverySlotInTheEndNeverMoreThanThePacingAtOnce() {
        machine = ClusterStateMachine(member: "a", slotCount: 1024)
        var pending = join()
        var epoch: UInt64 = 1
        while !pending.isEmpty {
            #expect(pending.count <= machine.policy.concurrentTakeovers)
            let slot = pending.removeFirst()
            epoch += 1
            #expect(machine.claimed(slot, epoch: epoch, at: now) == [.startSlot(slot: slot, epoch: epoch)])
            pending += machine.slotStarted(slot, at: now).compactMap { if case .claim(let s, _) = $0 { s } else { nil } }
        }
        #expect(machine.serving.count == 1024 && machine.servingCount == 1024)
        #expect(machine.notReadyBecause.isEmpty)
    }

    /// A member given another slot count than the cluster was created with leaves before it is a member: its slots
    /// would be other hubs' than its peers', and its member key would move slots to it.
    @Test mutating func aMemberGivenAnotherSlotCountThanTheClustersRefusesToTakePart() {
        #expect(machine.start(at: now) == [.grantLease(ttl: .seconds(2))])
        _ = machine.leaseGranted(7, sentAt: now, at: now)
        let actions = machine.registered(layout: "64", at: now)
        guard case .refuse(let reason) = actions.first else {
            Issue.record("no refusal: \(actions)")
            return
        }
        #expect(reason.contains("created with 64 slots") && reason.contains("given 12"))
        #expect(Array(actions.dropFirst()) == [.fence(until: nil), .revokeLease(lease: 7), .finish])
        #expect(machine.memberJoined("b", at: now) == [], "it claims nothing")
        #expect(machine.notReadyBecause == ["left the cluster"])
    }

    @Test mutating func aMemberGivenTheClustersSlotCountJoins() {
        #expect(machine.start(at: now) == [.grantLease(ttl: .seconds(2))])
        _ = machine.leaseGranted(7, sentAt: now, at: now)
        #expect(machine.registered(layout: "12", at: now) == [.load])
        #expect(machine.loaded(members: ["a"], claims: [:], at: now).count == 12)
    }

    /// A member given no slot count takes the one the cluster recorded (after a reshard, the new one), claims its
    /// slots out of that many, and refuses only a record that is no count.
    @Test mutating func aMemberGivenNoSlotCountTakesTheClusters() {
        machine = ClusterStateMachine(member: "a", slotCount: 64, followsRecordedCount: true)
        _ = machine.start(at: now)
        _ = machine.leaseGranted(7, sentAt: now, at: now)
        #expect(machine.registered(layout: "12", at: now) == [.load])
        #expect(machine.slotCount == 12)
        let claims = machine.loaded(members: ["a", "b"], claims: [:], at: now)
        let claimed = claims.compactMap { if case .claim(let slot, _) = $0 { slot } else { nil } }
        #expect(!claimed.isEmpty)
        #expect(claimed.sorted() == (0..<12).filter { Rendezvous.owner(of: $0, among: ["a", "b"]) == "a" })

        var unreadable = ClusterStateMachine(member: "a", slotCount: 64, followsRecordedCount: true)
        _ = unreadable.start(at: now)
        _ = unreadable.leaseGranted(7, sentAt: now, at: now)
        guard case .refuse(let reason) = unreadable.registered(layout: "many", at: now).first else {
            Issue.record("a record that is no count was taken")
            return
        }
        #expect(reason.contains("created with many slots"))
    }

    /// While a reshard moves the states (`12 resharding`), a member that registers leaves at once and waits, to join
    /// with the new count: its slots would rebuild before their states are there.
    @Test mutating func aMemberThatRegistersWhileTheClusterIsReshardedWaitsForTheNewCount() {
        #expect(machine.start(at: now) == [.grantLease(ttl: .seconds(2))])
        _ = machine.leaseGranted(7, sentAt: now, at: now)
        #expect(machine.registered(layout: "16 resharding", at: now) == [.fence(until: nil), .revokeLease(lease: 7), .finish])
        #expect(machine.leftForReshard == ClusterSlots(16))
        #expect(machine.notReadyBecause == ["the cluster is being resharded to 16 slots"])
    }

    /// A running member that sees the count become `16 resharding` leaves as a graceful shutdown does (its slots stop
    /// first, then its lease is revoked, which frees its claims), to join again with 16; the end of a reshard, or a
    /// count written while it was not running, changes nothing.
    @Test mutating func aRunningMemberLeavesForAReshard() {
        _ = machine.start(at: now)
        _ = machine.leaseGranted(7, sentAt: now, at: now)
        _ = machine.registered(layout: "12", at: now)
        #expect(machine.layoutChanged("16", at: now) == [])
        let claims = machine.loaded(members: ["a"], claims: [:], at: now)
        #expect(claims.count == 12)
        _ = machine.slotClaimed(3, by: "a", epoch: 40, at: now)
        _ = machine.claimed(3, epoch: 40, at: now)
        _ = machine.slotStarted(3, at: now)
        #expect(machine.serving == [3: 40])
        let actions = machine.layoutChanged("16 resharding", at: now)
        #expect(actions == [.stopSlot(slot: 3, reason: .resharding), .fence(until: nil), .revokeLease(lease: 7), .finish])
        #expect(machine.leftForReshard == ClusterSlots(16) && machine.serving.isEmpty)
        #expect(machine.layoutChanged("16 resharding", at: now) == [], "left already")
    }
}
