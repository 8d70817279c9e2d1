import AccessoryModel
import BridgeCore
import Foundation
import Testing

/// The bridge's decisions as plain chains of events → actions, without a broker or a codec.
@Suite struct BridgeStateMachineTests {
    static let hub1 = HubID("hub-1")!
    static let hub2 = HubID("hub-2")!
    static let headphones = AccessoryID("headphones")!
    static let phone = BluetoothAddress("12:34:56:78:9A:BC")!
    static let start = Timestamp(unixMilliseconds: 1_763_790_000_000)

    var core = BridgeStateMachine(instanceID: "t")
    var now = start

    mutating func send(
        _ request: AccessoryRequest, _ sequence: UInt64, from hub: HubID = hub1, about id: AccessoryID = headphones
    ) -> [BridgeAction] {
        core.telemetry(.success(request), sequence: sequence, from: hub, about: id, at: now)
    }

    /// Paired, registered with both capabilities, connected to the phone (sequences 1 to 3), and the phone plays.
    mutating func setUpHeadphones() {
        _ = send(.paired(name: "Studio", model: "S", hardwareCapabilities: .all), 1)
        _ = send(.register(.all), 2)
        _ = send(.sources(primary: Self.phone.data, secondary: nil), 3)
        _ = core.sourceReported(SourceReport(activity: .media), from: Self.phone, at: now)
    }

    static func answer(_ actions: [BridgeAction]) -> BridgeAction.Answer? {
        actions.lazy.compactMap { if case .answer(let answer) = $0 { answer } else { nil } }.first
    }
    /// The states published, in order: those of `.publishState`, and the one an answer publishes.
    static func states(_ actions: [BridgeAction]) -> [AccessoryState] {
        actions.compactMap {
            switch $0 {
            case .publishState(let state): state
            case .answer(let answer) where answer.publishesState: answer.state
            default: nil
            }
        }
    }
    static func commands(_ actions: [BridgeAction]) -> [SwitchCommand] {
        actions.compactMap { if case .sendCommand(let command) = $0 { command } else { nil } }
    }
    static func rebirths(_ actions: [BridgeAction]) -> [BridgeAction.Rebirth] {
        actions.compactMap { if case .requestRebirth(let rebirth) = $0 { rebirth } else { nil } }
    }

    // MARK: - Each hub owns only its own accessories

    @Test mutating func anotherHubChangesNothingAndSeesNothing() throws {
        setUpHeadphones()
        let before = core.state(of: Self.headphones)
        // The attack of the issue: a high sequence from another hub.
        for request in [AccessoryRequest.register(.all), .placement(.onHead), .unpaired,
            .paired(name: "Mine now", model: "X", hardwareCapabilities: .all)]
        {
            let actions = send(request, 1000, from: Self.hub2)
            #expect(actions.count == 1, "only an answer: \(actions)")
            let answer = try #require(Self.answer(actions))
            #expect(answer.result.error?.code == .invalidRequest)
            #expect(answer.result.error?.reason.contains("belongs to another hub") == true)
            #expect(answer.result.error?.reason.contains("hub-1") == false, "the owner is not named")
            #expect(answer.state == nil, "nothing of the owner's state")
        }
        #expect(core.state(of: Self.headphones) == before)
        // The owner's count goes on: 4 is the next one, not a duplicate of 1000, and no rebirth is asked.
        let actions = send(.placement(.onHead), 4)
        #expect(Self.answer(actions)?.result == .applied)
        #expect(Self.rebirths(actions).isEmpty)
        #expect(Self.commands(actions).map(\.action) == [.routeToAccessory])
    }

    @Test mutating func anotherHubRepeatingTheOwnersSequenceGetsNoCachedAnswer() throws {
        _ = send(.paired(name: "Secret Name", model: "S", hardwareCapabilities: .all), 1)
        let answer = try #require(Self.answer(send(.paired(name: "x", model: "y", hardwareCapabilities: .all), 1, from: Self.hub2)))
        #expect(answer.result != .duplicate(.succeeded))
        #expect(answer.state == nil)
    }

    @Test mutating func anAccessoryMovesOnlyOnceItsHubUnpairedIt() throws {
        setUpHeadphones()
        #expect(Self.answer(send(.unpaired, 4))?.result == .applied)
        let moved = send(.paired(name: "Moved", model: "S", hardwareCapabilities: .all), 1, from: Self.hub2)
        #expect(Self.answer(moved)?.result == .applied)
        #expect(Self.answer(moved)?.state?.accessory.hub == Self.hub2)
        // The old hub is now the other one.
        let old = try #require(Self.answer(send(.register(.all), 5)))
        #expect(old.result.error?.reason.contains("belongs to another hub") == true)
        #expect(old.state == nil)
        // hub-2's count is its own: 2 follows its 1.
        #expect(Self.answer(send(.register(.all), 2, from: Self.hub2))?.result == .applied)
    }

    // MARK: - Sequences, outcomes, rebirth

    @Test mutating func aRetryOfTheLastSequenceGetsItsOriginalOutcome() throws {
        setUpHeadphones()
        let failed = send(.update(Configuration(deviceCapabilities: .audioSwitching)), 4)
        let error = try #require(Self.answer(failed)?.result.error)
        // The failure consumed its sequence, and its state says so.
        let state = try #require(Self.states(failed).first)
        #expect(state.accessory.lastSequence == 4 && state.accessory.lastError == error)

        let retry = send(.update(Configuration(deviceCapabilities: .audioSwitching)), 4)
        #expect(Self.answer(retry)?.result == .duplicate(.failed(error)))
        #expect(Self.answer(retry)?.state != nil)
        #expect(Self.states(retry).isEmpty && Self.commands(retry).isEmpty)

        _ = send(.placement(.onHead), 5)
        #expect(Self.answer(send(.placement(.onHead), 5))?.result == .duplicate(.succeeded))
        #expect(Self.answer(send(.placement(.offHead), 3))?.result == .duplicate(.notKept(last: 5)))
    }

    @Test mutating func theOriginalOutcomeSurvivesARestart() throws {
        setUpHeadphones()
        _ = send(.register([.audioSwitching]), 4)  // fine
        let error = try #require(Self.answer(send(.placement(.onHead), 5))?.result.error)
        #expect(error.code == .accessoryNotCapable)
        let retained = try #require(core.state(of: Self.headphones))

        var restarted = BridgeStateMachine(instanceID: "t2")
        restarted.restore(retained, at: now)
        restarted.restoringFinished()
        let retry = restarted.telemetry(
            .success(.placement(.onHead)), sequence: 5, from: Self.hub1, about: Self.headphones, at: now)
        #expect(Self.answer(retry)?.result == .duplicate(.failed(error)))
    }

    @Test mutating func aGapAsksTheOwnerForARebirthAtMostOncePerInterval() {
        setUpHeadphones()
        var rebirths = Self.rebirths(send(.placement(.onHead), 7))
        #expect(rebirths == [.init(hub: Self.hub1, accessory: Self.headphones, lastSequence: 3, receivedSequence: 7)])
        rebirths = Self.rebirths(send(.placement(.offHead), 9))
        #expect(rebirths.isEmpty)
        now = now.advanced(byMilliseconds: 10_000)
        #expect(Self.rebirths(send(.placement(.onHead), 11)).count == 1)
    }

    @Test mutating func aRequestAboutAnUnknownAccessoryLeavesNothing() {
        for index in 0..<100 {
            let actions = send(.placement(.onHead), 5, about: AccessoryID("ghost-\(index)")!)
            #expect(actions.count == 1)
        }
        _ = send(.paired(name: String(repeating: "n", count: 300), model: "", hardwareCapabilities: .all), 1)
        #expect(core.accessoryCount == 0)
        #expect(core.routingFootprint == (0, 0))
    }

    // MARK: - Hubs, time, what could not be sent

    @Test mutating func aHubGoingOfflineTouchesOnlyItsOwnAccessoriesOnceItsGraceEnds() {
        setUpHeadphones()
        _ = send(.paired(name: "Other", model: "O", hardwareCapabilities: .all), 1, from: Self.hub2,
            about: AccessoryID("other")!)
        _ = send(.placement(.onHead), 4)
        #expect(core.hubStatus(Self.hub2, online: false, at: now).isEmpty, "within the grace: nothing yet")
        #expect(core.nextDeadline == now + .seconds(10))
        let actions = core.tick(at: now + .seconds(10))
        #expect(Self.states(actions).map(\.accessory.id) == [AccessoryID("other")!])
        #expect(Self.commands(actions).isEmpty)
        now = now + .seconds(10)
        #expect(core.hubStatus(Self.hub1, online: false, at: now).isEmpty)
        let mine = core.tick(at: now + .seconds(10))
        #expect(Self.commands(mine).map(\.action) == [.release])
        #expect(Self.states(mine).first?.accessory.isStale == true)
    }

    /// A hub that comes back within the grace (a broker restart sends its will, then it reconnects) changes nothing:
    /// no state, no command, and the device keeps playing on the headphones.
    @Test mutating func aHubBackWithinItsGraceChangesNothing() {
        setUpHeadphones()
        _ = send(.placement(.onHead), 4)
        #expect(core.hubStatus(Self.hub1, online: false, at: now).isEmpty)
        #expect(!core.hubsOnline.contains(Self.hub1))
        #expect(core.hubStatus(Self.hub1, online: false, at: now + .seconds(3)).isEmpty, "its retained will again")
        #expect(core.hubStatus(Self.hub1, online: true, at: now + .seconds(4)).isEmpty)
        #expect(core.hubsOnline.contains(Self.hub1))
        #expect(core.tick(at: now + .seconds(30)).isEmpty, "the grace's deadline finds it online")
        #expect(core.state(of: Self.headphones)?.accessory.isStale == false)
        #expect(core.state(of: Self.headphones)?.routedSource == Self.phone)
    }

    @Test mutating func withNoGraceAnOfflineHubIsStaleAtOnce() {
        var policy = BridgeStateMachine.Policy()
        policy.hubOfflineGrace = .zero
        core = BridgeStateMachine(policy: policy, instanceID: "t")
        setUpHeadphones()
        _ = send(.placement(.onHead), 4)
        let actions = core.hubStatus(Self.hub1, online: false, at: now)
        #expect(Self.commands(actions).map(\.action) == [.release])
        #expect(Self.states(actions).first?.accessory.isStale == true)
    }

    @Test mutating func diagnosticsComeDueAtTheirDeadline() {
        _ = send(.paired(name: "Studio", model: "S", hardwareCapabilities: .all), 1)
        _ = send(.register(.all), 2)
        #expect(core.nextDeadline == Self.start.advanced(byMilliseconds: 30_000))
        #expect(core.tick(at: Self.start.advanced(byMilliseconds: 29_999)).isEmpty)
        let due = core.tick(at: Self.start.advanced(byMilliseconds: 30_000))
        #expect(Self.states(due).first?.accessory.diagnostics.count == 2)
        #expect(core.nextDeadline == nil)
    }

    @Test mutating func aCommandThatCouldNotBeSentIsSentOnReconnection() throws {
        setUpHeadphones()
        let route = try #require(Self.commands(send(.placement(.onHead), 4)).first)
        core.notSent(.sendCommand(route))
        // Nothing else happens meanwhile: on reconnection the route is sent again, with its reason.
        let again = Self.commands(core.publishingResumed(at: now))
        #expect(again.map(\.action) == [.routeToAccessory])
        #expect(again.first?.reason == .putOn)
        #expect(again.first.map { $0.sequence > route.sequence } == true)
        #expect(Self.commands(core.publishingResumed(at: now)).isEmpty, "owed once")
    }

    @Test mutating func anOwedCommandThatNoLongerHoldsIsDropped() throws {
        setUpHeadphones()
        let route = try #require(Self.commands(send(.placement(.onHead), 4)).first)
        core.notSent(.sendCommand(route))
        // Taken off before the connection is back: the device never got the route, so nothing is paused either.
        #expect(Self.commands(send(.placement(.offHead), 5)).isEmpty)
        #expect(Self.commands(core.publishingResumed(at: now)).isEmpty)
    }

    @Test mutating func aStateThatCouldNotBePublishedIsPublishedOnReconnection() throws {
        setUpHeadphones()
        let state = try #require(Self.states(send(.placement(.onHead), 4)).first)
        core.notSent(.publishState(state))
        let again = Self.states(core.publishingResumed(at: now))
        #expect(again.map(\.accessory.id) == [Self.headphones])
        #expect(again.first?.accessory.configuration.devicePlacement == .onHead)
    }

    @Test mutating func statesThatCouldNotBePublishedComeBackABatchAtATime() {
        var refused: [AccessoryID] = []
        for index in 0..<25 {
            let id = AccessoryID("acc-\(index)")!
            for state in Self.states(send(.paired(name: "A", model: "M", hardwareCapabilities: .all), 1, about: id)) {
                core.notSent(.publishState(state))
                refused.append(state.accessory.id)
            }
        }
        #expect(refused.count == 25)
        var republished: [AccessoryID] = []
        var sizes: [Int] = []
        while core.hasUnpublishedStates {
            let batch = Self.states(core.publishingResumed(at: now, statesAtMost: 10)).map(\.accessory.id)
            sizes.append(batch.count)
            // The first of the first batch fails again: it comes back after the others.
            if sizes.count == 1, let first = batch.first {
                core.notSent(.publishState(core.state(of: first)!))
                republished += batch.dropFirst()
            } else {
                republished += batch
            }
        }
        #expect(sizes == [10, 10, 5, 1])
        #expect(republished.sorted() == refused.sorted(), "each once")
        #expect(republished.last == refused.sorted().first)
        #expect(core.publishingResumed(at: now, statesAtMost: 10).isEmpty)
    }

    @Test mutating func unpairedAccessoriesAndUnlistedSourcesLeaveNoRoutingState() {
        for index in 0..<50 {
            let id = AccessoryID("acc-\(index)")!
            let source = BluetoothAddress(rawValue: 0x0100_0000_0000 + UInt64(index))!
            _ = send(.paired(name: "A", model: "M", hardwareCapabilities: .all), 1, about: id)
            _ = send(.register(.all), 2, about: id)
            _ = send(.sources(primary: source.data, secondary: nil), 3, about: id)
            _ = core.sourceReported(SourceReport(activity: .idle), from: source, at: now)
        }
        #expect(core.routingFootprint == (50, 50))
        for index in 0..<50 {
            _ = send(.unpaired, 4, about: AccessoryID("acc-\(index)")!)
        }
        #expect(core.routingFootprint == (0, 0))
        // Devices nobody lists, reporting idle, leave nothing either.
        for index in 0..<50 {
            _ = core.sourceReported(
                SourceReport(activity: .idle), from: BluetoothAddress(rawValue: 0x0200_0000_0000 + UInt64(index))!,
                at: now)
        }
        #expect(core.routingFootprint == (0, 0))
    }
}
