import AccessoryModel
import Testing

/// The routing rules, each as a chain of events and the commands it must produce.
@Suite struct RoutingEngineTests {
    typealias F = Fixture
    typealias I = RoutingHarness.Issued
    let phone = Fixture.phone
    let laptop = Fixture.laptop
    let tv = Fixture.tv
    let headphones = Fixture.headphones
    let earbuds = Fixture.earbuds

    // MARK: Rule 1: only registered accessories with .audioSwitching, not stale, take part

    @Test(arguments: [Registration.paired, .invalidated, .unpaired])
    func accessoriesThatAreNotRegisteredNeverRoute(_ registration: Registration) {
        var h = RoutingHarness()
        h.source(phone, .media)
        h.change(
            RoutingAccessory(
                id: headphones, registration: registration, capabilities: .all, placement: .onHead, sources: [phone]))
        #expect(h.last.commands.isEmpty)
        #expect(h.engine.routedSource(for: headphones) == nil)
    }

    @Test func accessoriesWithoutAudioSwitchingNeverRoute() {
        var h = RoutingHarness()
        h.source(phone, .media)
        #expect(h.register(headphones, capabilities: .placement, placement: .onHead, sources: [phone]) == [])
        #expect(h.source(laptop, .call) == [])
        #expect(h.engine.routes.isEmpty)
    }

    @Test func aStaleAccessoryReleasesItsSourceAndTakesNoPart() {
        var h = RoutingHarness()
        h.source(phone, .media)
        #expect(h.register(headphones, placement: .onHead, sources: [phone]) == [.route(phone, headphones, .putOn)])
        #expect(h.stale(headphones, true) == [.release(phone, headphones, .accessoryIneligible)])
        #expect(h.last.rerouted == [headphones])
        #expect(h.engine.routedSource(for: headphones) == nil)
        #expect(h.source(laptop, .media) == [], "a stale accessory takes no part")
        // Fresh again and still worn: it is put on again.
        #expect(h.stale(headphones, false) == [.route(phone, headphones, .putOn)])
    }

    @Test func droppingAudioSwitchingReleasesTheSource() {
        var h = RoutingHarness()
        h.source(phone, .media)
        h.register(headphones, placement: .inEar, sources: [phone])
        #expect(h.capabilities(headphones, .placement) == [.release(phone, headphones, .accessoryIneligible)])
    }

    // MARK: Rule 2: worn means in ear, on head or over the ear; without .placement, while it has a source

    @Test(arguments: [(Placement.inEar, true), (.onHead, true), (.overTheEar, true), (.offHead, false)])
    func wornPlacements(_ placement: Placement, _ worn: Bool) {
        var h = RoutingHarness()
        h.source(phone, .media)
        let issued = h.register(headphones, placement: placement, sources: [phone])
        #expect(issued == (worn ? [.route(phone, headphones, .putOn)] : []))
        #expect(RoutingAccessory(id: headphones, registration: .registered, capabilities: .all, placement: placement,
            sources: [phone]).isWorn == worn)
    }

    @Test func withPlacementButNoneReportedItIsNotWorn() {
        var h = RoutingHarness()
        h.source(phone, .media)
        #expect(h.register(headphones, placement: nil, sources: [phone]) == [])
    }

    @Test func withoutPlacementItIsWornWhileItHasASource() {
        var h = RoutingHarness()
        h.source(phone, .media)
        #expect(h.register(earbuds, capabilities: .audioSwitching) == [])
        #expect(h.connect(earbuds, [phone]) == [.route(phone, earbuds, .putOn)])
        #expect(h.connect(earbuds, []) == [.pause(phone, earbuds, .sourceDisconnected)])
        #expect(h.engine.routes.isEmpty)
    }

    // MARK: Rule 3: a source routes to at most one accessory, an accessory from at most one source

    @Test func puttingOnASecondAccessoryMovesTheSource() {
        var h = RoutingHarness()
        h.source(phone, .media)
        h.register(headphones, placement: .onHead, sources: [phone])
        h.advance(.seconds(1))
        #expect(h.register(earbuds, placement: .inEar, sources: [phone]) == [.route(phone, earbuds, .putOn)])
        #expect(Set(h.last.rerouted) == [earbuds, headphones])
        #expect(h.engine.routedSource(for: headphones) == nil)
        #expect(h.engine.routes == [phone: earbuds])
    }

    // MARK: Rule 4: put on

    @Test func puttingOnRoutesTheActiveCandidate() {
        var h = RoutingHarness()
        h.register(headphones, placement: .offHead, sources: [phone, laptop])
        h.source(laptop, .media)
        #expect(h.place(headphones, .onHead) == [.route(laptop, headphones, .putOn)])
        #expect(h.last.rerouted == [headphones])
        #expect(h.engine.routedSource(for: headphones) == laptop)
    }

    @Test func aCallComesBeforeMedia() {
        var h = RoutingHarness()
        h.register(headphones, placement: .offHead, sources: [phone, laptop])
        h.source(phone, .call)
        h.advance(.seconds(1))
        h.source(laptop, .media)
        #expect(h.place(headphones, .inEar) == [.route(phone, headphones, .putOn)])
    }

    @Test func thenTheMostRecentlyActive() {
        var h = RoutingHarness()
        h.register(headphones, placement: .offHead, sources: [phone, laptop])
        h.source(laptop, .media)
        h.advance(.seconds(1))
        h.source(phone, .media)
        #expect(h.place(headphones, .overTheEar) == [.route(phone, headphones, .putOn)])
    }

    @Test func nothingIsRoutedWhenNoCandidateIsActive() {
        var h = RoutingHarness()
        h.register(headphones, placement: .offHead, sources: [phone, laptop])
        h.source(phone, .idle)
        h.source(tv, .media)  // active, but not a candidate
        #expect(h.place(headphones, .onHead) == [])
        #expect(h.engine.routedSource(for: headphones) == nil)
    }

    @Test func puttingBackOnWithinTheWindowRoutesAndResumes() {
        var h = RoutingHarness()
        h.source(phone, .media)
        h.register(headphones, placement: .onHead, sources: [phone])
        #expect(h.place(headphones, .offHead) == [.pause(phone, headphones, .takenOff)])
        h.advance(.seconds(15))
        #expect(h.place(headphones, .onHead) == [.route(phone, headphones, .putOn), .resume(phone, headphones, .putOn)])
    }

    @Test func aPausedSourceIsResumedEvenAfterItReportsIdle() {
        var h = RoutingHarness()
        h.source(phone, .media)
        h.register(headphones, placement: .onHead, sources: [phone])
        h.place(headphones, .offHead)
        h.source(phone, .idle)  // the device obeyed the PAUSE
        h.advance(.seconds(3))
        #expect(h.place(headphones, .inEar) == [.route(phone, headphones, .putOn), .resume(phone, headphones, .putOn)])
        // The memory is spent: off and on again, the idle phone is neither routed nor resumed.
        h.place(headphones, .offHead)
        #expect(h.place(headphones, .inEar) == [])
    }

    @Test func afterTheWindowItIsOnlyRoutedIfStillActive() {
        var h = RoutingHarness()
        h.source(phone, .media)
        h.register(headphones, placement: .onHead, sources: [phone])
        h.place(headphones, .offHead)
        h.advance(.milliseconds(15_001))
        #expect(h.place(headphones, .onHead) == [.route(phone, headphones, .putOn)])

        var idle = RoutingHarness()
        idle.source(phone, .media)
        idle.register(headphones, placement: .onHead, sources: [phone])
        idle.place(headphones, .offHead)
        idle.source(phone, .idle)
        idle.advance(.seconds(16))
        #expect(idle.place(headphones, .onHead) == [])
    }

    @Test func theResumeWindowIsAPolicy() {
        var h = RoutingHarness(resumeWindow: .seconds(2))
        h.source(phone, .media)
        h.register(headphones, placement: .onHead, sources: [phone])
        h.place(headphones, .offHead)
        h.advance(.seconds(3))
        #expect(h.place(headphones, .onHead) == [.route(phone, headphones, .putOn)])
    }

    @Test func onlyTheAccessoryItWasTakenOffResumesIt() {
        var h = RoutingHarness()
        h.source(phone, .media)
        h.register(headphones, placement: .onHead, sources: [phone])
        h.register(earbuds, placement: .offHead, sources: [phone])
        h.place(headphones, .offHead)
        h.source(phone, .idle)
        #expect(h.place(earbuds, .inEar) == [], "the earbuds did not pause it")
        #expect(h.place(headphones, .onHead) == [.route(phone, headphones, .putOn), .resume(phone, headphones, .putOn)])
    }

    @Test func playingAgainOnItsOwnForgetsThePause() {
        var h = RoutingHarness()
        h.source(phone, .media)
        h.register(headphones, placement: .onHead, sources: [phone])
        h.place(headphones, .offHead)
        h.source(phone, .idle)
        h.source(phone, .media)  // the person pressed play on the phone
        #expect(h.place(headphones, .onHead) == [.route(phone, headphones, .putOn)])
    }

    // MARK: Rule 5: taken off

    @Test func takingOffPausesAtOnce() {
        var h = RoutingHarness()
        h.source(phone, .call)
        h.register(headphones, placement: .inEar, sources: [phone])
        #expect(h.place(headphones, .offHead) == [.pause(phone, headphones, .takenOff)])
        #expect(h.last.rerouted == [headphones])
        #expect(h.engine.routedSource(for: headphones) == nil)
        #expect(h.last.nextDeadline == h.now + .seconds(15))
        #expect(h.place(headphones, nil) == [], "nothing left to pause")
    }

    @Test func theMemoryOfAPauseExpiresOnTick() {
        var h = RoutingHarness()
        h.source(phone, .media)
        h.register(headphones, placement: .inEar, sources: [phone])
        h.place(headphones, .offHead)
        h.source(phone, .idle)
        #expect(h.engine.nextDeadline == h.now + .seconds(15))
        h.advance(.seconds(14))
        h.tick()
        #expect(h.engine.nextDeadline == h.now + .seconds(1), "not yet due")
        h.advance(.seconds(1))
        #expect(h.tick() == [])
        #expect(h.last.nextDeadline == nil)
        #expect(h.engine.nextDeadline == nil)
    }

    // MARK: Rule 6: a candidate source becomes active

    @Test func anActiveSourceIsRoutedToTheMostRecentlyWornCandidate() {
        var h = RoutingHarness()
        h.register(headphones, placement: .onHead, sources: [phone])
        h.advance(.seconds(1))
        h.register(earbuds, placement: .inEar, sources: [phone, laptop])
        #expect(h.source(phone, .media) == [.route(phone, earbuds, .sourceActivated)])
        #expect(h.source(laptop, .media) == [
            .pause(phone, earbuds, .sourceActivated), .route(laptop, earbuds, .sourceActivated),
        ])
    }

    @Test func noWornCandidateNoRoute() {
        var h = RoutingHarness()
        h.register(headphones, placement: .offHead, sources: [phone])
        #expect(h.source(phone, .media) == [])
    }

    @Test func mediaNeverTakesAnAccessoryFromACall() {
        var h = RoutingHarness()
        h.register(headphones, placement: .onHead, sources: [phone, laptop])
        #expect(h.source(laptop, .call) == [.route(laptop, headphones, .sourceActivated)])
        #expect(h.source(phone, .media) == [])
        #expect(h.engine.routes == [laptop: headphones])
    }

    @Test func aCallTakesItFromMedia() {
        var h = RoutingHarness()
        h.register(headphones, placement: .onHead, sources: [phone, laptop])
        h.source(laptop, .media)
        #expect(h.source(phone, .call) == [
            .pause(laptop, headphones, .sourceActivated), .route(phone, headphones, .sourceActivated),
        ])
    }

    @Test func mediaBecomingACallStaysWhereItIs() {
        var h = RoutingHarness()
        h.register(headphones, placement: .onHead, sources: [phone])
        h.source(phone, .media)
        #expect(h.source(phone, .call) == [])
        #expect(h.source(phone, .idle) == [], "going idle keeps the route")
        #expect(h.engine.routes == [phone: headphones])
    }

    @Test func anIdleSourceBeingDisplacedIsPaused() {
        var h = RoutingHarness()
        h.register(headphones, placement: .onHead, sources: [phone, laptop])
        h.source(phone, .media)
        h.source(phone, .idle)
        #expect(h.source(laptop, .media) == [
            .pause(phone, headphones, .sourceActivated), .route(laptop, headphones, .sourceActivated),
        ])
    }

    @Test func aNewActiveCandidateOfAWornFreeAccessoryIsRouted() {
        var h = RoutingHarness()
        h.source(laptop, .media)
        h.register(headphones, placement: .onHead, sources: [phone])
        #expect(h.connect(headphones, [phone, laptop]) == [.route(laptop, headphones, .sourceActivated)])
    }

    // MARK: Rule 7: a routed source disappears from the identifiers

    @Test func aDisconnectedSourceIsPausedAndTheOtherActiveCandidateRouted() {
        var h = RoutingHarness()
        h.source(laptop, .media)
        h.advance(.seconds(1))
        h.source(phone, .media)
        h.register(headphones, placement: .onHead, sources: [phone, laptop])
        #expect(h.engine.routedSource(for: headphones) == phone)
        #expect(h.connect(headphones, [laptop]) == [
            .pause(phone, headphones, .sourceDisconnected), .route(laptop, headphones, .sourceDisconnected),
        ])
    }

    @Test func anIdleOtherCandidateIsNotRouted() {
        var h = RoutingHarness()
        h.source(phone, .media)
        h.register(headphones, placement: .onHead, sources: [phone, laptop])
        #expect(h.connect(headphones, [laptop]) == [.pause(phone, headphones, .sourceDisconnected)])
    }

    // MARK: Rule 8: unpair, re-pair or invalidation while routed

    @Test(arguments: [Registration.unpaired, .invalidated, .paired])
    func theEndOfARegistrationReleasesTheSource(_ registration: Registration) {
        var h = RoutingHarness()
        h.source(phone, .media)
        h.register(headphones, placement: .onHead, sources: [phone])
        #expect(h.registration(headphones, registration) == [.release(phone, headphones, .registrationEnded)])
        #expect(h.engine.routes.isEmpty)
    }

    // MARK: Rule 9: no command repeats what is in force

    @Test func nothingRepeatsWhileNothingChanges() {
        var h = RoutingHarness()
        h.source(phone, .media)
        h.register(headphones, placement: .onHead, sources: [phone])
        #expect(h.place(headphones, .inEar) == [], "still worn")
        #expect(h.source(phone, .media) == [])
        #expect(h.connect(headphones, [phone, laptop]) == [])
    }

    @Test func aDeviceThatAlreadyHasTheRouteGetsNoRoute() {
        var h = RoutingHarness()
        h.source(phone, .media, routedTo: headphones)
        #expect(h.register(headphones, placement: .onHead, sources: [phone]) == [])
        #expect(h.engine.routes == [phone: headphones], "the route is the engine's too")
        #expect(h.place(headphones, .offHead) == [.pause(phone, headphones, .takenOff)])
    }

    @Test func aDeviceRoutedElsewhereIsNotPausedOffThisAccessory() {
        var h = RoutingHarness()
        h.source(phone, .media)
        h.register(headphones, placement: .onHead, sources: [phone])
        h.source(phone, .media, routedTo: earbuds)  // the person moved the audio by hand
        #expect(h.place(headphones, .offHead) == [])
        #expect(h.engine.routes.isEmpty)
    }

    @Test func aReportedRouteIsAdoptedWhenPossible() {
        var h = RoutingHarness()
        h.register(headphones, placement: .onHead, sources: [phone])
        h.source(phone, .idle, routedTo: headphones)
        #expect(h.last.rerouted == [headphones])
        #expect(h.engine.routes == [phone: headphones])
        #expect(h.source(phone, .media) == [], "already routed")
    }

    @Test func oldSourceReportsChangeNothing() {
        var h = RoutingHarness()
        h.register(headphones, placement: .onHead, sources: [phone])
        h.source(phone, .idle, sequence: 5)
        #expect(h.source(phone, .media, sequence: 5) == [], "a repeat")
        #expect(h.source(phone, .media, sequence: 4) == [], "older")
        #expect(h.engine.activity(of: phone) == .idle)
        #expect(h.source(phone, .media, sequence: 6) == [.route(phone, headphones, .sourceActivated)])
        #expect(h.source(phone, .idle, sequence: 0) == [], "unsequenced is always applied")
        #expect(h.engine.activity(of: phone) == .idle)
    }

    @Test func aReportWithoutActivityKeepsTheActivity() {
        var h = RoutingHarness()
        h.source(phone, .call)
        h.source(phone, nil)
        #expect(h.engine.activity(of: phone) == .call)
    }

    // MARK: Restoring after a restart

    @Test func aRestoredRouteSendsNothingAndRoutingContinues() {
        var h = RoutingHarness()
        h.engine.restoreSource(SourceReport(sequence: 9, activity: .media), from: phone, at: h.now)
        let view = RoutingAccessory(
            id: headphones, registration: .registered, capabilities: .all, placement: .onHead, sources: [phone])
        h.views[headphones] = view
        h.engine.restore(view, routedSource: phone, at: h.now)
        #expect(h.engine.routes == [phone: headphones])
        #expect(h.source(phone, .media, sequence: 9) == [], "an old report")
        #expect(h.source(phone, .media, sequence: 10) == [], "already routed")
        #expect(h.place(headphones, .offHead) == [.pause(phone, headphones, .takenOff)], "the device has the route")
    }

    @Test func anImpossibleRestoredRouteIsDropped() {
        var h = RoutingHarness()
        let view = RoutingAccessory(
            id: headphones, registration: .registered, capabilities: .all, placement: .offHead, sources: [phone])
        h.views[headphones] = view
        h.engine.restore(view, routedSource: phone, at: h.now)
        #expect(h.engine.routes.isEmpty)
        h.engine.restoreSource(SourceReport(activity: .media), from: phone, at: h.now)
        #expect(h.place(headphones, .onHead) == [.route(phone, headphones, .putOn)])
    }

    @Test(arguments: [
        (1_763_790_000_000_000, 1_763_790_000_000_001), (0, 1), (8, 9), (9, 10), (99, 100), (.max - 1, .max),
    ] as [(UInt64, UInt64)])
    func commandSequencesStartAboveTheBase(base: UInt64, first: UInt64) {
        var engine = RoutingEngine(instanceID: "b", commandSequenceBase: base)
        _ = engine.sourceReported(SourceReport(activity: .media), from: phone, at: Fixture.start)
        let output = engine.accessoryChanged(
            RoutingAccessory(id: headphones, registration: .registered, capabilities: .all, placement: .onHead,
                sources: [phone]), at: Fixture.start)
        #expect(output.commands.map(\.sequence) == [first])
        // The id ends in the sequence, in decimal.
        #expect(output.commands.map(\.id) == ["b-123456789abc-\(first)"])
    }

    // MARK: Rule 10: unique ids, per-source increasing sequences, the reason of the rule

    @Test func commandsAreNumberedPerSource() throws {
        var h = RoutingHarness()
        h.source(phone, .media)
        h.source(laptop, .media)
        h.register(headphones, placement: .onHead, sources: [phone])
        h.register(earbuds, placement: .onHead, sources: [laptop])
        h.place(headphones, .offHead)
        h.place(headphones, .onHead)
        let phoneCommands = h.log.filter { $0.source == phone }
        #expect(phoneCommands.map(\.sequence) == [1, 2, 3, 4])
        #expect(phoneCommands.map(\.action) == [.routeToAccessory, .pause, .routeToAccessory, .resume])
        #expect(h.log.filter { $0.source == laptop }.map(\.sequence) == [1])
        #expect(Set(h.log.map(\.id)).count == h.log.count)
        let first = try #require(phoneCommands.first)
        #expect(first.id == "test-123456789abc-1")
        #expect(first.issuedAt == Fixture.start)
        #expect(first.description == "ROUTE_TO_ACCESSORY 12:34:56:78:9A:BC to headphones (PUT_ON)")
    }
}

extension RoutingEngineTests {
    /// Found by hub-sim --trace: a device's report that crossed the bridge's PAUSE said it was still routed, and the
    /// engine took that as in force, so putting the headphones back on sent neither ROUTE nor RESUME.
    @Test func aRouteReportedBeforeTheLatestCommandIsIgnored() throws {
        var h = RoutingHarness()
        h.source(phone, .media)
        h.register(headphones, placement: .onHead, sources: [phone])
        let route = try #require(h.log.last)
        #expect(h.place(headphones, .offHead) == [.pause(phone, headphones, .takenOff)])
        // The device's report written after the ROUTE, before it applied the PAUSE.
        _ = h.engine.sourceReported(
            SourceReport(activity: .media, routedAccessory: headphones, lastCommandSequence: route.sequence),
            from: phone, at: h.now)
        #expect(h.place(headphones, .onHead) == [.route(phone, headphones, .putOn), .resume(phone, headphones, .putOn)])
        // A report that says it applied the latest command counts.
        let resume = try #require(h.log.last)
        _ = h.engine.sourceReported(
            SourceReport(activity: .media, routedAccessory: earbuds, lastCommandSequence: resume.sequence),
            from: phone, at: h.now)
        #expect(h.place(headphones, .offHead) == [], "the device says it moved to the earbuds")
    }

    /// In a cluster, reports compare (epoch, sequence): a device that last applied an older owner's command, however
    /// high its sequence (another machine's clock), has not applied this owner's.
    @Test func aRouteReportedUnderAnOlderOwnerIsIgnored() throws {
        var h = RoutingHarness(epoch: 9)
        h.source(phone, .media)
        h.register(headphones, placement: .onHead, sources: [phone])
        let route = try #require(h.log.last)
        #expect(route.epoch == 9 && route.order == CommandOrder(epoch: 9, sequence: route.sequence))
        #expect(h.place(headphones, .offHead) == [.pause(phone, headphones, .takenOff)])
        // Written after an older owner's command with a far higher sequence: out of date all the same.
        _ = h.engine.sourceReported(
            SourceReport(
                activity: .media, routedAccessory: headphones, lastCommandSequence: route.sequence + 1_000_000,
                lastCommandEpoch: 8),
            from: phone, at: h.now)
        #expect(h.place(headphones, .onHead) == [.route(phone, headphones, .putOn), .resume(phone, headphones, .putOn)])
        // This owner's latest command applied: the report counts.
        let resume = try #require(h.log.last)
        _ = h.engine.sourceReported(
            SourceReport(
                activity: .media, routedAccessory: earbuds, lastCommandSequence: resume.sequence, lastCommandEpoch: 9),
            from: phone, at: h.now)
        #expect(h.place(headphones, .offHead) == [], "the device says it moved to the earbuds")
    }

    @Test func commandOrderIsByEpochThenSequence() {
        #expect(CommandOrder(epoch: 1, sequence: 1) > CommandOrder(epoch: 0, sequence: .max))
        #expect(CommandOrder(epoch: 3, sequence: 5) < CommandOrder(epoch: 3, sequence: 6))
        #expect(CommandOrder(epoch: 2, sequence: 9) < CommandOrder(epoch: 3, sequence: 1))
        #expect(SourceReport(activity: .idle).lastCommand == nil)
        #expect(SourceReport(activity: .idle, lastCommandSequence: 4, lastCommandEpoch: 2).lastCommand
            == CommandOrder(epoch: 2, sequence: 4))
    }
}

/// Rule 11, one test per row of docs/routing.md's table: what a call displaced comes back when the call ends, as Apple's
/// "Playing audio" guidance has it for a resumable interruption; a nonresumable one brings nothing back.
@Suite struct InterruptionTests {
    let phone = Fixture.phone
    let laptop = Fixture.laptop
    let headphones = Fixture.headphones

    /// Headphones worn, connected to the phone (primary) and the laptop (secondary); the phone plays media on them;
    /// then a call starts on the laptop and takes them. Returns the PAUSE that stopped the phone.
    func callOnTheLaptopDisplacingMedia(_ h: inout RoutingHarness) throws -> SwitchCommand {
        h.source(phone, .media)
        h.register(headphones, placement: .inEar, sources: [phone, laptop])
        #expect(h.engine.routes == [phone: headphones])
        #expect(h.source(laptop, .call) == [
            .pause(phone, headphones, .sourceActivated), .route(laptop, headphones, .sourceActivated),
        ])
        return try #require(h.log.first { $0.action == .pause })
    }

    @Test func theCallEndsAndTheMediaComesBack() throws {
        var h = RoutingHarness()
        let pause = try callOnTheLaptopDisplacingMedia(&h)
        // The phone, paused, says so (after applying the PAUSE).
        h.engine.sourceReported(SourceReport(activity: .idle, lastCommandSequence: pause.sequence), from: phone, at: h.now)
        #expect(h.source(laptop, .idle) == [
            .release(laptop, headphones, .interruptionEnded), .route(phone, headphones, .interruptionEnded),
            .resume(phone, headphones, .interruptionEnded),
        ])
        #expect(h.engine.routes == [phone: headphones])
    }

    @Test func theCallingDeviceDisconnectsAndTheMediaComesBack() throws {
        var h = RoutingHarness()
        _ = try callOnTheLaptopDisplacingMedia(&h)
        #expect(h.connect(headphones, [phone]) == [
            .pause(laptop, headphones, .sourceDisconnected), .route(phone, headphones, .interruptionEnded),
            .resume(phone, headphones, .interruptionEnded),
        ])
    }

    @Test func takenOffDuringTheCallNothingComesBack() throws {
        var h = RoutingHarness()
        _ = try callOnTheLaptopDisplacingMedia(&h)
        #expect(h.place(headphones, .offHead) == [.pause(laptop, headphones, .takenOff)])
        #expect(h.source(laptop, .idle) == [])
        // Put back on: rule 4 as always (the paused call, within the resume window, comes back with its pause).
        #expect(h.place(headphones, .inEar).allSatisfy { $0.reason == .putOn })
    }

    @Test func pausedOnTheDeviceDuringTheCallNothingComesBack() throws {
        var h = RoutingHarness()
        let pause = try callOnTheLaptopDisplacingMedia(&h)
        // The person paused the phone before the bridge's PAUSE reached it.
        h.engine.sourceReported(
            SourceReport(activity: .idle, lastCommandSequence: pause.sequence - 1), from: phone, at: h.now)
        #expect(h.source(laptop, .idle) == [.release(laptop, headphones, .interruptionEnded)])
    }

    @Test func theDisplacedDevicePlaysSomethingItselfNothingComesBack() throws {
        var h = RoutingHarness()
        let pause = try callOnTheLaptopDisplacingMedia(&h)
        h.engine.sourceReported(SourceReport(activity: .idle, lastCommandSequence: pause.sequence), from: phone, at: h.now)
        h.source(phone, .media)  // a new playlist, on its speaker: media never takes a call's accessory
        #expect(h.source(laptop, .idle) == [
            .release(laptop, headphones, .interruptionEnded),
        ])
    }

    @Test func theDisplacedDeviceDisconnectedNothingComesBack() throws {
        var h = RoutingHarness()
        _ = try callOnTheLaptopDisplacingMedia(&h)
        #expect(h.connect(headphones, [laptop]) == [])
        #expect(h.source(laptop, .idle) == [.release(laptop, headphones, .interruptionEnded)])
    }

    @Test func aCallLongerThanTheWindowBringsNothingBack() throws {
        var h = RoutingHarness()
        _ = try callOnTheLaptopDisplacingMedia(&h)
        h.advance(.seconds(301))
        #expect(h.source(laptop, .idle) == [.release(laptop, headphones, .interruptionEnded)])
    }

    @Test func aCallOnTheDevicePlayingMediaIsTheDevicesOwnBusiness() {
        var h = RoutingHarness()
        h.source(phone, .media)
        h.register(headphones, placement: .inEar, sources: [phone, laptop])
        #expect(h.source(phone, .call) == [], "the phone's call goes where its media was")
        #expect(h.source(phone, .idle) == [], "and the phone resumes its own media, if it wants")
        #expect(h.engine.routes == [phone: headphones])
    }

    @Test func aSecondCallDuringTheFirstHandsBackToTheFirstThenNothing() throws {
        var h = RoutingHarness()
        _ = try callOnTheLaptopDisplacingMedia(&h)
        // The phone, paused, takes a call itself: the newer call takes the headphones; its media will not come back.
        #expect(h.source(phone, .call) == [
            .pause(laptop, headphones, .sourceActivated), .route(phone, headphones, .sourceActivated),
        ])
        // The phone's call ends: the laptop's call, still on hold, comes back.
        #expect(h.source(phone, .idle) == [
            .release(phone, headphones, .interruptionEnded), .route(laptop, headphones, .interruptionEnded),
            .resume(laptop, headphones, .interruptionEnded),
        ])
        // The laptop's call ends: the phone's media had been replaced by its own call; nothing comes back.
        #expect(h.source(laptop, .idle) == [.release(laptop, headphones, .interruptionEnded)])
    }

    @Test func aCallThatDisplacedNothingLeavesNothingToResume() {
        var h = RoutingHarness()
        h.register(headphones, placement: .inEar, sources: [phone, laptop])
        #expect(h.source(laptop, .call) == [.route(laptop, headphones, .sourceActivated)])
        #expect(h.source(laptop, .idle) == [])
    }
}

/// Rule 12: the person's controls. AudioAccessoryKit leaves "automatic" vs "when last connected" to the person; home
/// automation sets it per accessory, and may pin the one source that may play on it.
@Suite struct ControlsTests {
    let phone = Fixture.phone
    let laptop = Fixture.laptop
    let headphones = Fixture.headphones

    /// Headphones worn, connected to the phone and the laptop, both playing media; the phone (most recent) routed.
    func bothPlayingPhoneRouted(_ h: inout RoutingHarness) {
        h.source(laptop, .media)
        h.advance(.seconds(1))
        h.source(phone, .media)
        h.register(headphones, placement: .onHead, sources: [phone, laptop])
        #expect(h.engine.routes == [phone: headphones])
    }

    @Test func automaticSwitchingOffLetsGoWithoutACommand() {
        var h = RoutingHarness()
        bothPlayingPhoneRouted(&h)
        #expect(h.controls(headphones, automatic: false) == [], "what plays on it goes on playing")
        #expect(h.last.rerouted == [headphones], "its state shows no route any more")
        #expect(h.engine.routedSource(for: headphones) == nil)
        #expect(h.place(headphones, .offHead) == [], "taking them off pauses nothing")
        #expect(h.place(headphones, .onHead) == [], "putting them on routes nothing")
        #expect(h.source(laptop, .call) == [], "a call takes nothing")
        #expect(h.engine.footprint.accessories == 0, "no routing residue")
    }

    @Test func automaticSwitchingBackOnIsAsIfJustPutOn() {
        var h = RoutingHarness()
        bothPlayingPhoneRouted(&h)
        h.controls(headphones, automatic: false)
        #expect(h.controls(headphones, automatic: true) == [], "the phone's route is still in force on the device")
        #expect(h.engine.routes == [phone: headphones])
        #expect(h.place(headphones, .offHead) == [.pause(phone, headphones, .takenOff)])
    }

    @Test func automaticSwitchingBackOnRoutesWhatPlaysNow() {
        var h = RoutingHarness()
        h.source(phone, .media)
        h.register(headphones, placement: .onHead, sources: [phone, laptop])
        h.controls(headphones, automatic: false)
        h.source(phone, .idle)
        h.source(laptop, .media)
        #expect(h.controls(headphones, automatic: true) == [.route(laptop, headphones, .putOn)])
    }

    @Test func pinningAnotherSourcePausesTheRoutedOneAndRoutesThePinned() {
        var h = RoutingHarness()
        bothPlayingPhoneRouted(&h)
        #expect(h.controls(headphones, pinned: laptop) == [
            .pause(phone, headphones, .controlsChanged), .route(laptop, headphones, .controlsChanged),
        ])
        #expect(h.engine.routes == [laptop: headphones])
    }

    @Test func thePinnedSourceIsTheOnlyCandidate() {
        var h = RoutingHarness()
        bothPlayingPhoneRouted(&h)
        #expect(h.controls(headphones, pinned: phone) == [], "the routed source is the pinned one")
        #expect(h.source(laptop, .call) == [], "a call on another source does not take the accessory")
        #expect(h.place(headphones, .offHead) == [.pause(phone, headphones, .takenOff)])
        #expect(h.place(headphones, .onHead) == [.route(phone, headphones, .putOn), .resume(phone, headphones, .putOn)])
    }

    @Test func aPinnedSourceThatIsNotConnectedLeavesNoCandidateUntilItConnects() {
        var h = RoutingHarness()
        h.source(phone, .media)
        h.source(Fixture.tv, .media)
        h.register(headphones, placement: .onHead, sources: [phone])
        #expect(h.controls(headphones, pinned: Fixture.tv) == [.pause(phone, headphones, .controlsChanged)])
        #expect(h.connect(headphones, [phone, Fixture.tv]) == [.route(Fixture.tv, headphones, .sourceActivated)])
    }

    @Test func unpinningMakesTheOtherSourcesCandidatesAgain() {
        var h = RoutingHarness()
        h.source(phone, .media)
        h.register(headphones, placement: .onHead, sources: [phone, laptop])
        h.controls(headphones, pinned: laptop)
        #expect(h.engine.routes.isEmpty, "the laptop is idle")
        #expect(h.controls(headphones) == [.route(phone, headphones, .controlsChanged)])
    }
}
