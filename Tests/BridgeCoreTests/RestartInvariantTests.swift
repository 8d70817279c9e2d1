import AccessoryModel
import Foundation
import Testing
import TestSupport

@testable import BridgeCore

/// A restart in the middle of random traffic (seeded, so a failure replays): one machine lives through hubs' telemetry,
/// devices' reports, hub statuses and ticks; a second takes back what the first published last (each accessory's
/// retained state, each device's report), in any order and now and then twice or with an older state delivered again,
/// and lives on. Throughout, the statistics the bridge keeps as it goes must be those of its accessories as they are,
/// and the restarted machine must publish the states the first one last published.
@Suite struct RestartInvariantTests {
    static let hubs = [HubID("hub-1")!, HubID("hub-2")!]
    static let accessories = (0..<5).map { AccessoryID("acc-\($0)")! }
    static let sources = (0..<4).map { BluetoothAddress(rawValue: 0xA0_0000_0000 + UInt64($0))! }

    /// The statistics, counted from the machine's accessories one by one.
    static func walkedStatistics(_ machine: BridgeStateMachine) -> BridgeStateMachine.Statistics {
        var statistics = BridgeStateMachine.Statistics()
        for state in machine.allStates() {
            statistics.accessories += 1
            statistics.byRegistration[state.accessory.registration, default: 0] += 1
            if RoutingAccessory(state.accessory).isWorn { statistics.worn += 1 }
            if state.routedSource != nil { statistics.routed += 1 }
        }
        return statistics
    }

    static func check(_ machine: BridgeStateMachine, _ context: String) {
        var kept = machine.statistics()
        kept.sourcesByActivity = [:]  // not in the accessories' states: RoutingInvariantTests checks them
        #expect(kept == walkedStatistics(machine), Comment(rawValue: context))
    }

    struct Life {
        var machine = BridgeStateMachine(instanceID: "i")
        var now = Timestamp(unixMilliseconds: 1_763_790_000_000)
        var sequences: [AccessoryID: UInt64] = [:]
        /// What was published last on each accessory's and device's retained topic, and every state published.
        var retained: [AccessoryID: AccessoryState] = [:]
        var reports: [BluetoothAddress: SourceReport] = [:]
        var published: [AccessoryState] = []

        mutating func record(_ actions: [BridgeAction]) {
            for case .publishState(let state) in actions {
                retained[state.accessory.id] = state
                published.append(state)
            }
        }

        mutating func randomStep(using random: inout SeededGenerator) {
            let id = RestartInvariantTests.accessories.randomElement(using: &random)!
            let source = RestartInvariantTests.sources.randomElement(using: &random)!
            switch Int.random(in: 0..<100, using: &random) {
            case 0..<60:
                let hub = RestartInvariantTests.hubs.randomElement(using: &random)!
                let sequence = sequences[id, default: 0] + 1
                sequences[id] = sequence
                let data: Data? = Bool.random(using: &random) ? source.data : nil
                let request: AccessoryRequest =
                    switch Int.random(in: 0..<12, using: &random) {
                    case 0: .paired(name: "N", model: "M", hardwareCapabilities: .all)
                    case 1: .register([.all, .audioSwitching, .placement].randomElement(using: &random)!)
                    case 2: .unpaired
                    case 3, 4: .sources(primary: data, secondary: nil)
                    default: .placement([nil, .inEar, .onHead, .overTheEar, .offHead].randomElement(using: &random)!)
                    }
                record(machine.telemetry(.success(request), sequence: sequence, from: hub, about: id, at: now))
            case 60..<80:
                let report = SourceReport(activity: Activity.allCases.randomElement(using: &random)!)
                reports[source] = report
                record(machine.sourceReported(report, from: source, at: now))
            case 80..<85:
                record(
                    machine.hubStatus(
                        RestartInvariantTests.hubs.randomElement(using: &random)!, online: Bool.random(using: &random),
                        at: now))
            default:
                now = now.advanced(byMilliseconds: Int64.random(in: 0...40_000, using: &random))
                record(machine.tick(at: now))
            }
        }
    }

    @Test(arguments: 0..<16)
    func statisticsAndStatesSurviveARestart(seed: Int) async throws {
        try await inTheBackground {
            var random = SeededGenerator(seed: UInt64(seed) &* 0x2545_F491_4F6C_DD1D &+ 3)
            var life = Life()
            for step in 0..<400 {
                life.randomStep(using: &random)
                Self.check(life.machine, "seed \(seed), before the restart, step \(step)")
            }

            // The restart: the retained states, in any order; now and then one delivered twice, or an older state of the
            // same accessory before its last.
            var restarted = Life()
            restarted.now = life.now
            restarted.sequences = life.sequences
            let older = life.published.shuffled(using: &random).prefix(4)
            var deliveries = (Array(life.retained.values) + older).shuffled(using: &random)
            // Each accessory's last delivery is its retained state, as the broker's would be.
            for (id, state) in life.retained where deliveries.last(where: { $0.accessory.id == id }) != state {
                deliveries.append(state)
            }
            for state in deliveries { restarted.machine.restore(state, at: restarted.now) }
            for (source, report) in life.reports.shuffled(using: &random) {
                restarted.machine.restoreSource(report, from: source, at: restarted.now)
            }
            restarted.machine.restoringFinished()
            Self.check(restarted.machine, "seed \(seed), restored")
            for (id, state) in life.retained where state.accessory.registration != .unpaired {
                #expect(
                    restarted.machine.state(of: id)?.accessory == state.accessory,
                    Comment(rawValue: "seed \(seed): \(id) comes back as it was published"))
            }

            restarted.retained = life.retained
            restarted.reports = life.reports
            for step in 0..<400 {
                restarted.randomStep(using: &random)
                Self.check(restarted.machine, "seed \(seed), after the restart, step \(step)")
            }
        }
    }
}
