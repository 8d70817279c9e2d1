@testable import AccessoryModel
import Testing

/// Rule 13, head tracking: each way a session starts, moves and ends, its fences, the host's setting, restarts.
@Suite struct HeadTrackingTests {
    /// An event without its id and time: what a rule test compares.
    struct News: Hashable, CustomStringConvertible {
        var kind: HeadTrackingEvent.Kind
        var host: BluetoothAddress
        var active: Bool
        var reason: HeadTrackingEvent.Reason

        init(_ kind: HeadTrackingEvent.Kind, _ host: BluetoothAddress, active: Bool = true, _ reason: HeadTrackingEvent.Reason) {
            self.kind = kind
            self.host = host
            self.active = active
            self.reason = reason
        }

        init(_ event: HeadTrackingEvent) {
            self.init(event.kind, event.session.host, active: event.session.isHeadTrackingActive, event.reason)
        }

        var description: String { "\(kind) \(host) \(active ? "on" : "off") \(reason)" }
    }

    let phone = Fixture.phone
    let laptop = Fixture.laptop
    let headphones = Fixture.headphones
    var h = RoutingHarness(epoch: 7, sessionKey: SessionKey(0x1234, 0x5678))

    var news: [News] { h.last.headTracking.map(News.init) }

    /// Head-tracking headphones listing the phone and the laptop, the phone playing media with head tracking on, the
    /// headphones put on: the phone is routed, and hosts the session.
    mutating func streaming() {
        h.register(headphones, capabilities: .all, sources: [phone, laptop])
        h.source(phone, .media, headTracking: true)
        h.place(headphones, .onHead)
    }

    @Test mutating func aSessionBeginsWhenATrackingAccessoryIsWornAndRouted() throws {
        h.register(headphones, capabilities: .all, sources: [phone])
        h.source(phone, .media, headTracking: true)
        #expect(news.isEmpty, "not worn yet")
        #expect(h.place(headphones, .onHead) == [.route(phone, headphones, .putOn)])
        #expect(news == [News(.activated, phone, .routed)])
        let session = try #require(h.engine.headTrackingSession(of: headphones))
        #expect(session.host == phone && session.isHeadTrackingActive)
        #expect(session.order.epoch == 7, "fenced by the engine's epoch, as its commands")
        #expect(session.restorationID == "aab:headphones")
        #expect(h.last.rerouted.contains(headphones), "its state shows the session")
    }

    @Test mutating func noSessionWithoutTheCapabilityOrARoute() {
        h.register(headphones, capabilities: [.audioSwitching, .placement], sources: [phone])
        h.source(phone, .media, headTracking: true)
        h.place(headphones, .onHead)
        #expect(news.isEmpty && h.engine.headTrackingSession(of: headphones) == nil)
        // With the capability, worn but nothing plays: no host.
        var idle = RoutingHarness()
        idle.register(headphones, capabilities: .all, sources: [phone])
        idle.place(headphones, .onHead)
        #expect(idle.last.headTracking.isEmpty)
    }

    @Test mutating func theSessionFollowsTheRouteOldHostFirst() throws {
        streaming()
        let first = try #require(h.engine.headTrackingSession(of: headphones))
        // A call on the laptop takes the headphones from the phone's media (rule 6).
        h.source(laptop, .call)
        #expect(news == [News(.invalidated, phone, .routeMoved), News(.activated, laptop, active: false, .routed)])
        let second = try #require(h.engine.headTrackingSession(of: headphones))
        #expect(second.id != first.id, "a new session, with an id of its own")
        let orders = h.last.headTracking.map(\.session.order)
        #expect(orders == orders.sorted() && orders[0] > first.order, "every news after the last")
        // The call ends: the phone comes back (rule 11), and the session with it.
        h.source(laptop, .idle)
        #expect(news.map(\.kind) == [.invalidated, .activated])
        #expect(h.engine.headTrackingSession(of: headphones)?.host == phone)
    }

    @Test mutating func theHostsSettingIsToldAsAChangeOfState() {
        streaming()
        h.source(phone, .media, headTracking: false)
        #expect(news == [News(.stateChanged, phone, active: false, .switchChanged)])
        #expect(h.last.rerouted == [headphones], "its state and view show the setting")
        h.source(phone, .media, headTracking: false)
        #expect(news.isEmpty, "told once")
        #expect(h.last.rerouted.isEmpty)
        h.source(phone, .media, headTracking: true)
        #expect(news == [News(.stateChanged, phone, active: true, .switchChanged)])
    }

    @Test(arguments: [
        ("taken off", HeadTrackingEvent.Reason.takenOff),
        ("unpaired", .registrationEnded),
        ("registered again without head tracking", .registrationEnded),
        ("its hub stale", .ineligible),
        ("automatic switching off", .ineligible),
        ("the device stops", .unrouted),
    ])
    func theSessionEnds(_ what: String, _ reason: HeadTrackingEvent.Reason) {
        var test = HeadTrackingTests()
        test.streaming()
        switch what {
        case "taken off": test.h.place(test.headphones, .offHead)
        case "unpaired": test.h.registration(test.headphones, .unpaired)
        case "registered again without head tracking": test.h.capabilities(test.headphones, [.audioSwitching, .placement])
        case "its hub stale": test.h.stale(test.headphones, true)
        case "automatic switching off": test.h.controls(test.headphones, automatic: false)
        default: test.h.connect(test.headphones, [test.laptop])
        }
        #expect(test.news == [News(.invalidated, test.phone, reason)], "\(what)")
        #expect(test.h.engine.headTrackingSession(of: test.headphones) == nil)
    }

    @Test mutating func aRestartTakesTheSessionBackWhenTheRouteHoldsAndEndsItWhenNot() throws {
        streaming()
        let session = try #require(h.engine.headTrackingSession(of: headphones))
        let view = h.views[headphones]!

        // Taken back with the route it follows: nothing to say, same id.
        var kept = RoutingEngine(instanceID: "after", epoch: 8)
        kept.restore(view, routedSource: phone, headTracking: session, at: h.now)
        kept.restoreSource(SourceReport(activity: .media, headTracking: true), from: phone, at: h.now)
        kept.restoringFinished()
        #expect(kept.reconcileHeadTracking(at: h.now).headTracking.isEmpty)
        #expect(kept.headTrackingSession(of: headphones) == session, "a takeover keeps the session")

        // The route did not survive (the retained state says none): the session ends.
        var gone = RoutingEngine(instanceID: "after", epoch: 8)
        gone.restore(view, routedSource: nil, headTracking: session, at: h.now)
        gone.restoringFinished()
        let output = gone.reconcileHeadTracking(at: h.now)
        #expect(output.headTracking.map(News.init) == [News(.invalidated, phone, .unrouted)])
        #expect(output.headTracking.first?.session.order.epoch == 8, "the new owner's news")

        // The host turned head tracking off after the retained state was written (the bridge stopped between the
        // two): the session is kept, with its id, and hears of the setting.
        var behind = RoutingEngine(instanceID: "after", epoch: 8)
        behind.restore(view, routedSource: phone, headTracking: session, at: h.now)
        behind.restoreSource(SourceReport(activity: .media, headTracking: false), from: phone, at: h.now)
        behind.restoringFinished()
        let told = behind.reconcileHeadTracking(at: h.now)
        #expect(told.headTracking.map(News.init) == [News(.stateChanged, phone, active: false, .switchChanged)])
        #expect(told.rerouted == [headphones], "its state and view show the setting")
        #expect(behind.headTrackingSession(of: headphones)?.id == session.id)
        #expect(behind.headTrackingSession(of: headphones)?.isHeadTrackingActive == false)
    }

    @Test mutating func aShutdownEndsEverySession() {
        streaming()
        let output = h.engine.shutDown(at: h.now)
        #expect(output.headTracking.map(News.init) == [News(.invalidated, phone, .shutdown)])
    }

    @Test func sessionIdsAreSipHashUnderTheKey() {
        // SipHash-2-4's reference vector (Aumasson and Bernstein, appendix A).
        let key = SessionKey(0x0706_0504_0302_0100, 0x0F0E_0D0C_0B0A_0908)
        #expect(key.sipHash(Array(0..<15)) == 0xA129_CA61_49BE_45E5)
        // Another key, another id; the same key and order, the same id.
        let order = CommandOrder(epoch: 1, sequence: 2)
        #expect(key.id(for: headphones, at: order) == key.id(for: headphones, at: order))
        #expect(key.id(for: headphones, at: order) != SessionKey(1, 2).id(for: headphones, at: order))
        #expect(key.id(for: headphones, at: order) != key.id(for: headphones, at: CommandOrder(epoch: 1, sequence: 3)))
    }
}
