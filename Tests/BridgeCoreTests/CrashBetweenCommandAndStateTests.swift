import AccessoryModel
import Foundation
import Testing

@testable import BridgeCore

/// A bridge killed after a ROUTE went out but before the accessory's state reached the broker: its successor decides
/// the same put-on again when the hub sends it again, knowing neither the route nor which device played last (a
/// restart makes every active device active since the restart). This is what failed HubSimTests' chaos test once
/// in make test-stress (hub-sim: "chaos-h2-a7: 15 commands of action 1 for 14 PUT_ON changes", no device commanded
/// twice in a row), reproduced without I/O. What the killed bridge sent is known only from the device's report. When
/// that report is retained before the successor starts (the usual case: the device answers in milliseconds), the
/// successor chooses that device again and sends nothing. When it comes later, the second ROUTE cannot be avoided, but
/// two devices left on one accessory can.
@Suite struct CrashBetweenCommandAndStateTests {
    static let hub = HubID("hub-1")!
    static let headphones = AccessoryID("headphones")!
    static let phone = BluetoothAddress(rawValue: 0xA0_0000_0001)!
    static let laptop = BluetoothAddress(rawValue: 0xA0_0000_0002)!

    static func routes(_ actions: [BridgeAction]) -> [BluetoothAddress] {
        actions.compactMap {
            if case .sendCommand(let command) = $0, command.action == .routeToAccessory { command.source } else { nil }
        }
    }

    static func commandsOf(_ actions: [BridgeAction]) -> [SwitchCommand] {
        actions.compactMap { if case .sendCommand(let command) = $0 { command } else { nil } }
    }

    static func pauses(_ actions: [BridgeAction]) -> [BluetoothAddress] {
        actions.compactMap {
            if case .sendCommand(let command) = $0, command.action == .pause { command.source } else { nil }
        }
    }

    /// The successor routes the laptop (first listed, and "as recently active" as the phone after the restart); the
    /// phone then reports the route the killed bridge gave it. Before, nothing told either to stop, and both played
    /// on the headphones (rule 3 broken on the devices' side). Now the phone is paused off them: the successor's
    /// choice stands.
    @Test func aDeviceRoutedByAKilledBridgeIsNotLeftPlayingBesideTheOneItsSuccessorRoutes() throws {
        var now = Timestamp(unixMilliseconds: 1_763_790_000_000)
        var killed = BridgeStateMachine(instanceID: "killed")
        var retained: AccessoryState?
        func telemetry(_ request: AccessoryRequest, _ sequence: UInt64) {
            for case .answer(let answer) in killed.telemetry(
                .success(request), sequence: sequence, from: Self.hub, about: Self.headphones, at: now)
            {
                if answer.publishesState, let state = answer.state { retained = state }
            }
        }
        telemetry(.paired(name: "Studio", model: "M", hardwareCapabilities: .all), 1)
        telemetry(.register(.all), 2)
        telemetry(.sources(primary: Self.laptop.data, secondary: Self.phone.data), 3)
        // The laptop plays, then the phone: the phone is the most recently active.
        let laptopReport = SourceReport(sequence: 1, activity: .media)
        let phoneReport = SourceReport(sequence: 1, activity: .media)
        _ = killed.sourceReported(laptopReport, from: Self.laptop, at: now)
        now = now.advanced(byMilliseconds: 1_000)
        _ = killed.sourceReported(phoneReport, from: Self.phone, at: now)
        now = now.advanced(byMilliseconds: 1_000)
        let before = try #require(retained)
        // Put on: the phone is routed; the bridge is killed before the new state is published.
        let putOn = killed.telemetry(
            .success(.placement(.onHead)), sequence: 4, from: Self.hub, about: Self.headphones, at: now)
        #expect(Self.routes(putOn) == [Self.phone])

        // Its command sequences start higher, as a restarted bridge's do (above the time in ms × 1000).
        var successor = BridgeStateMachine(instanceID: "successor", commandSequenceBase: 1_000_000)
        successor.restore(before, at: now)
        successor.restoreSource(laptopReport, from: Self.laptop, at: now)
        successor.restoreSource(phoneReport, from: Self.phone, at: now)
        successor.restoringFinished()
        now = now.advanced(byMilliseconds: 300)
        // The hub sends the put-on again (it had no result), before the phone's report of its route arrives.
        let again = successor.telemetry(
            .success(.placement(.onHead)), sequence: 4, from: Self.hub, about: Self.headphones, at: now)
        let late = successor.sourceReported(
            SourceReport(sequence: 2, activity: .media, routedAccessory: Self.headphones, lastCommandSequence: 1),
            from: Self.phone, at: now)
        #expect(Self.routes(again) == [Self.laptop])
        #expect(Self.pauses(late) == [Self.phone], "the laptop keeps the headphones, the phone is paused off them")
        #expect(successor.state(of: Self.headphones)?.routedSource == Self.laptop)
        // Said again before the phone applied that PAUSE, the old route is out of date (rule 9): no second PAUSE.
        let repeated = successor.sourceReported(
            SourceReport(sequence: 3, activity: .media, routedAccessory: Self.headphones, lastCommandSequence: 1),
            from: Self.phone, at: now)
        #expect(Self.commandsOf(repeated).isEmpty)
    }

    /// The phone's report of the route the killed bridge gave it reached the broker before the successor started, and
    /// is restored with the rest (after the laptop's, a few milliseconds later). Before, each device restored as
    /// active was active since the moment its state was read back: the laptop looked the more recent, was routed, and
    /// the phone, whose route nothing ended, played on beside it. Now both are as recent as each other, and the
    /// device already routed to the headphones wins the tie: no command at all.
    @Test func aSuccessorChoosesAgainTheDeviceThatReportsTheKilledBridgesRouteAndSendsNothing() throws {
        var now = Timestamp(unixMilliseconds: 1_763_790_000_000)
        var killed = BridgeStateMachine(instanceID: "killed")
        var retained: AccessoryState?
        for (sequence, request) in [
            AccessoryRequest.paired(name: "Studio", model: "M", hardwareCapabilities: .all), .register(.all),
            .sources(primary: Self.laptop.data, secondary: Self.phone.data),
        ].enumerated() {
            for case .answer(let answer) in killed.telemetry(
                .success(request), sequence: UInt64(sequence + 1), from: Self.hub, about: Self.headphones, at: now)
            {
                if answer.publishesState, let state = answer.state { retained = state }
            }
        }
        _ = killed.sourceReported(SourceReport(sequence: 1, activity: .media), from: Self.laptop, at: now)
        now = now.advanced(byMilliseconds: 1_000)
        _ = killed.sourceReported(SourceReport(sequence: 1, activity: .media), from: Self.phone, at: now)
        now = now.advanced(byMilliseconds: 1_000)
        let before = try #require(retained)
        let putOn = killed.telemetry(
            .success(.placement(.onHead)), sequence: 4, from: Self.hub, about: Self.headphones, at: now)
        let route = try #require(Self.commandsOf(putOn).first)
        #expect(route.source == Self.phone && route.action == .routeToAccessory)

        var successor = BridgeStateMachine(instanceID: "successor", commandSequenceBase: 1_000_000)
        now = now.advanced(byMilliseconds: 300)
        successor.restore(before, at: now)
        successor.restoreSource(
            SourceReport(sequence: 2, activity: .media, routedAccessory: Self.headphones,
                lastCommandSequence: route.sequence),
            from: Self.phone, at: now)
        now = now.advanced(byMilliseconds: 5)
        successor.restoreSource(SourceReport(sequence: 1, activity: .media), from: Self.laptop, at: now)
        successor.restoringFinished()
        now = now.advanced(byMilliseconds: 300)
        let again = successor.telemetry(
            .success(.placement(.onHead)), sequence: 4, from: Self.hub, about: Self.headphones, at: now)
        #expect(Self.commandsOf(again).isEmpty, "the phone already has the route")
        #expect(successor.state(of: Self.headphones)?.routedSource == Self.phone)
    }

    /// A device that reports a route to an accessory on which another source holds a call is paused off it too.
    @Test func aDeviceReportingARouteToAnAccessoryAnotherSourceHoldsIsPausedOffIt() throws {
        let now = Timestamp(unixMilliseconds: 1_763_790_000_000)
        var machine = BridgeStateMachine(instanceID: "successor")
        let hub = Self.hub, id = Self.headphones
        for (sequence, request) in [
            AccessoryRequest.paired(name: "Studio", model: "M", hardwareCapabilities: .all), .register(.all),
            .sources(primary: Self.laptop.data, secondary: Self.phone.data), .placement(.onHead),
        ].enumerated() {
            _ = machine.telemetry(.success(request), sequence: UInt64(sequence + 1), from: hub, about: id, at: now)
        }
        let call = machine.sourceReported(SourceReport(sequence: 1, activity: .call), from: Self.laptop, at: now)
        #expect(Self.routes(call) == [Self.laptop])
        let late = machine.sourceReported(
            SourceReport(sequence: 1, activity: .media, routedAccessory: id), from: Self.phone, at: now)
        #expect(Self.pauses(late) == [Self.phone])
        #expect(machine.state(of: id)?.routedSource == Self.laptop)
    }
}
