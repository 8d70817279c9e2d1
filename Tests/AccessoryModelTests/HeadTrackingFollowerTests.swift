import AccessoryModel
import Testing

/// The receiving end of rule 13 (a hub's or a host's): the fence by (epoch, sequence), and what each piece of news
/// tells a handler; then which frames a host renders.
@Suite struct HeadTrackingFollowerTests {
    typealias Action = HeadTrackingFollower.Action

    let phone = Fixture.phone
    let laptop = Fixture.laptop
    let headphones = Fixture.headphones
    let earbuds = Fixture.earbuds
    let hub = Fixture.hubA

    static let s1 = HeadTrackingSessionID(high: 1, low: 1)
    static let s2 = HeadTrackingSessionID(high: 2, low: 2)

    func session(
        _ id: HeadTrackingSessionID, on host: BluetoothAddress, active: Bool = true, epoch: UInt64 = 0,
        _ sequence: UInt64, of accessory: AccessoryID? = nil
    ) -> HeadTrackingSession {
        HeadTrackingSession(
            accessory: accessory ?? headphones, id: id, host: host, isHeadTrackingActive: active,
            order: CommandOrder(epoch: epoch, sequence: sequence))
    }

    func news(_ kind: HeadTrackingEvent.Kind, _ session: HeadTrackingSession, _ reason: HeadTrackingEvent.Reason = .routed)
        -> HeadTrackingEvent
    {
        HeadTrackingEvent(kind, session, reason: reason, at: Fixture.start)
    }

    @Test func aSessionIsActivatedChangedAndInvalidatedInOrder() {
        var follower = HeadTrackingFollower()
        let on = session(Self.s1, on: phone, 1)
        #expect(follower.receive(news(.activated, on), hub: hub) == .applied([.activate(on, hub: hub)]))
        #expect(follower.session(of: headphones) == .init(session: on, hub: hub))
        let off = session(Self.s1, on: phone, active: false, 2)
        #expect(follower.receive(news(.stateChanged, off, .switchChanged), hub: hub) == .applied([.changeState(off)]))
        #expect(follower.session(of: headphones)?.session.isHeadTrackingActive == false)
        let ended = session(Self.s1, on: phone, active: false, 3)
        #expect(follower.receive(news(.invalidated, ended, .takenOff), hub: hub) == .applied([.invalidate(ended, reason: .takenOff)]))
        #expect(follower.session(of: headphones) == nil)
    }

    /// Not newer than the last news taken: a repeat (QoS 1 may deliver twice) or an older owner's, dropped whatever
    /// it says.
    @Test func newsNotNewerThanTheLastIsDropped() {
        var follower = HeadTrackingFollower()
        let first = session(Self.s1, on: phone, epoch: 5, 10)
        _ = follower.receive(news(.activated, first), hub: hub)
        #expect(follower.receive(news(.activated, first), hub: hub) == .stale(last: first.order), "a repeat")
        // An older owner (epoch 4), whatever its sequence, ends nothing and starts nothing.
        let older = session(Self.s2, on: laptop, epoch: 4, 99)
        #expect(follower.receive(news(.invalidated, older, .routeMoved), hub: hub) == .stale(last: first.order))
        #expect(follower.receive(news(.activated, older), hub: hub) == .stale(last: first.order))
        #expect(follower.session(of: headphones)?.session == first)
        // A newer owner (epoch 6), whatever its sequence, is newer.
        let newer = session(Self.s1, on: phone, active: false, epoch: 6, 1)
        #expect(follower.receive(news(.stateChanged, newer, .switchChanged), hub: hub) == .applied([.changeState(newer)]))
        // Orders are per accessory: the earbuds' news counts on its own.
        let earbudsSession = session(Self.s2, on: laptop, 1, of: earbuds)
        #expect(follower.receive(news(.activated, earbudsSession), hub: hub) == .applied([.activate(earbudsSession, hub: hub)]))
    }

    /// The bridge owes only the latest news of an accessory: news may say how things stand after some were missed.
    @Test func newerNewsSaysHowTheAccessoryStandsWhateverWasMissed() {
        var follower = HeadTrackingFollower()
        let s1 = session(Self.s1, on: phone, 1)
        _ = follower.receive(news(.activated, s1), hub: hub)
        // The invalidation of s1 was missed: s2's activation replaces it.
        let s2 = session(Self.s2, on: laptop, 3)
        #expect(follower.receive(news(.activated, s2), hub: hub)
            == .applied([.invalidate(s1, reason: .routeMoved), .activate(s2, hub: hub)]))
        // A repeated activation of the session in force, with the setting changed: a change of state only.
        let s2off = session(Self.s2, on: laptop, active: false, 4)
        #expect(follower.receive(news(.activated, s2off), hub: hub) == .applied([.changeState(s2off)]))
        // The invalidation of a session never told (s3, after s2's end was missed) ends s2.
        let s3 = session(HeadTrackingSessionID(high: 3, low: 3), on: phone, 6)
        #expect(follower.receive(news(.invalidated, s3, .takenOff), hub: hub) == .applied([.invalidate(s2off, reason: .routeMoved)]))
        #expect(follower.session(of: headphones) == nil)
        // An invalidation with no session in force: taken (its order counts), nothing to tell.
        #expect(follower.receive(news(.invalidated, session(Self.s1, on: phone, 7), .takenOff), hub: hub) == .applied([]))
        // A change of state of a session not known: it is the session in force.
        let s4 = session(HeadTrackingSessionID(high: 4, low: 4), on: phone, active: false, 8)
        #expect(follower.receive(news(.stateChanged, s4, .switchChanged), hub: hub) == .applied([.activate(s4, hub: hub)]))
    }

    @Test func aHostTakesNewsOfItsOwnSessionsOnly() {
        var follower = HeadTrackingFollower(host: phone)
        #expect(follower.receive(news(.activated, session(Self.s1, on: laptop, 1)), hub: hub) == .otherHost)
        #expect(follower.session(of: headphones) == nil)
        // The laptop's news took no order: the phone's, older, still counts.
        let own = session(Self.s2, on: phone, 0)
        #expect(follower.receive(news(.activated, own), hub: hub) == .applied([.activate(own, hub: hub)]))
    }

    /// A host renders the frames of an accessory's current session from the accessory's hub; nothing else.
    @Test func framesOfTheCurrentSessionFromItsHubOnly() {
        var follower = HeadTrackingFollower(host: phone)
        #expect(follower.frame(of: Self.s1, from: hub, for: headphones) == .noSession)
        _ = follower.receive(news(.activated, session(Self.s1, on: phone, 1)), hub: hub)
        #expect(follower.frame(of: Self.s1, from: hub, for: headphones) == .current)
        #expect(follower.frame(of: Self.s2, from: hub, for: headphones) == .otherSession)
        #expect(follower.frame(of: Self.s1, from: Fixture.hubB, for: headphones) == .otherHub)
        #expect(follower.frame(of: Self.s1, from: hub, for: earbuds) == .noSession)
        // After its invalidation, the session's late frames are another session's… of none.
        _ = follower.receive(news(.invalidated, session(Self.s1, on: phone, 2), .takenOff), hub: hub)
        #expect(follower.frame(of: Self.s1, from: hub, for: headphones) == .noSession)
        // Then its successor's only.
        _ = follower.receive(news(.activated, session(Self.s2, on: phone, 3)), hub: hub)
        #expect(follower.frame(of: Self.s1, from: hub, for: headphones) == .otherSession)
        // News that names no hub lets no hub's frames through.
        var unnamed = HeadTrackingFollower(host: phone)
        _ = unnamed.receive(news(.activated, session(Self.s1, on: phone, 1)), hub: nil)
        #expect(unnamed.frame(of: Self.s1, from: hub, for: headphones) == .otherHub)
    }

    @Test func stoppingEndsEverySessionAndKeepsTheFence() {
        var follower = HeadTrackingFollower()
        let a = session(Self.s1, on: phone, 1)
        let b = session(Self.s2, on: laptop, 1, of: earbuds)
        _ = follower.receive(news(.activated, a), hub: hub)
        _ = follower.receive(news(.activated, b), hub: hub)
        #expect(follower.endAll(reason: .shutdown) == [.invalidate(b, reason: .shutdown), .invalidate(a, reason: .shutdown)])
        #expect(follower.sessions.isEmpty)
        #expect(follower.receive(news(.activated, a), hub: hub) == .stale(last: a.order))
    }
}
