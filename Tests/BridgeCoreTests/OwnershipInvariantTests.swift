import AccessoryModel
import BridgeCore
import Foundation
import Testing
import TestSupport

/// No input from hub B changes anything hub A's messages produce: random sequences (seeded, so a failure replays) of
/// hub A's telemetry, its devices' reports, ticks and hub statuses, with hub B's telemetry about A's accessories —
/// every kind of request, any sequence, A's own sequences included — interleaved. A machine that sees everything and
/// one that never sees B's messages must take every one of A's events to the same actions, and B's messages must
/// get nothing but an answer that shows none of A's state.
@Suite struct OwnershipInvariantTests {
    static let hubA = HubID("hub-a")!
    static let hubB = HubID("hub-b")!
    static let accessories = (0..<4).map { AccessoryID("acc-\($0)")! }
    static let sources = (0..<3).map { BluetoothAddress(rawValue: 0xA0_0000_0000 + UInt64($0))! }

    enum Event {
        case telemetry(HubID, AccessoryID, AccessoryRequest, sequence: UInt64)
        case source(BluetoothAddress, Activity)
        case hubStatus(HubID, online: Bool)
        case tick(advance: Int64)
    }

    static func randomRequest(using random: inout SeededGenerator) -> AccessoryRequest {
        let source: Data? = Bool.random(using: &random) ? sources.randomElement(using: &random)!.data : nil
        switch Int.random(in: 0..<10, using: &random) {
        case 0: return .paired(name: "B's", model: "X", hardwareCapabilities: .all)
        case 1: return .register([.all, .audioSwitching, .placement].randomElement(using: &random)!)
        case 2: return .update(Configuration(devicePlacement: .onHead, deviceCapabilities: .all,
            primaryAudioSourceDeviceIdentifier: source))
        case 3: return .unpaired
        case 4, 5: return .sources(primary: source, secondary: nil)
        default: return .placement([nil, .inEar, .onHead, .offHead].randomElement(using: &random)!)
        }
    }

    @Test(arguments: 0..<16)
    func hubBChangesNothingOfHubA(seed: Int) async throws {
        try await inTheBackground {
            var random = SeededGenerator(seed: UInt64(seed) &* 0x9E37_79B9_7F4A_7C15 &+ 7)
            var events: [Event] = []
            var sequences: [AccessoryID: UInt64] = [:]
            func next(_ id: AccessoryID) -> UInt64 {
                // Mostly the next one; now and then a repeat or a gap, as real hubs do.
                let last = sequences[id, default: 0]
                let sequence = [last + 1, last + 1, last + 1, last, last + 3, 0].randomElement(using: &random)!
                sequences[id] = max(last, sequence)
                return sequence
            }
            for id in Self.accessories {
                events.append(.telemetry(Self.hubA, id, .paired(name: "A's", model: "M", hardwareCapabilities: .all), sequence: next(id)))
                events.append(.telemetry(Self.hubA, id, .register(.all), sequence: next(id)))
            }
            for _ in 0..<800 {
                let roll = Int.random(in: 0..<100, using: &random)
                let id = Self.accessories.randomElement(using: &random)!
                switch roll {
                case 0..<35:
                    var request = Self.randomRequest(using: &random)
                    // A never unpairs nor re-pairs here, so that B can never become an owner.
                    if case .unpaired = request { request = .placement(.onHead) }
                    if case .paired = request { request = .placement(.offHead) }
                    events.append(.telemetry(Self.hubA, id, request, sequence: next(id)))
                case 35..<65:
                    // Sequences picked to collide with A's: its last, its next, far above.
                    let last = sequences[id, default: 0]
                    let sequence = [0, 1, last, last + 1, last + 2, 1000, .max].randomElement(using: &random)!
                    events.append(.telemetry(Self.hubB, id, Self.randomRequest(using: &random), sequence: sequence))
                case 65..<85:
                    events.append(.source(Self.sources.randomElement(using: &random)!, Activity.allCases.randomElement(using: &random)!))
                case 85..<90:
                    events.append(.hubStatus([Self.hubA, Self.hubB].randomElement(using: &random)!, online: Bool.random(using: &random)))
                default:
                    events.append(.tick(advance: Int64.random(in: 0...40_000, using: &random)))
                }
            }

            var everything = BridgeStateMachine(instanceID: "i")
            var withoutB = BridgeStateMachine(instanceID: "i")
            var now = Timestamp(unixMilliseconds: 1_763_790_000_000)
            for (step, event) in events.enumerated() {
                let context = "seed \(seed) step \(step): \(event)"
                switch event {
                case .telemetry(let hub, let id, let request, let sequence) where hub == Self.hubB:
                    let actions = everything.telemetry(.success(request), sequence: sequence, from: hub, about: id, at: now)
                    guard actions.count == 1, case .answer(let answer) = actions[0] else {
                        Issue.record(Comment(rawValue: "hub B's message did more than get an answer: \(actions)" + "\n" + context))
                        return
                    }
                    #expect(answer.state == nil, Comment(rawValue: "hub B saw hub A's state" + "\n" + context))
                    #expect(answer.result.error != nil, Comment(rawValue: "hub B's request succeeded" + "\n" + context))
                case .telemetry(let hub, let id, let request, let sequence):
                    let a = everything.telemetry(.success(request), sequence: sequence, from: hub, about: id, at: now)
                    let b = withoutB.telemetry(.success(request), sequence: sequence, from: hub, about: id, at: now)
                    guard a == b else { Issue.record(Comment(rawValue: "hub A's outcome differs: \(a)\nwithout B: \(b)" + "\n" + context)); return }
                case .source(let source, let activity):
                    let report = SourceReport(activity: activity)
                    guard everything.sourceReported(report, from: source, at: now)
                        == withoutB.sourceReported(report, from: source, at: now)
                    else { Issue.record(Comment(rawValue: "a source report differs" + "\n" + context)); return }
                case .hubStatus(let hub, let online):
                    guard everything.hubStatus(hub, online: online, at: now) == withoutB.hubStatus(hub, online: online, at: now)
                    else { Issue.record(Comment(rawValue: "a hub status differs" + "\n" + context)); return }
                case .tick(let advance):
                    now = now.advanced(byMilliseconds: advance)
                    guard everything.tick(at: now) == withoutB.tick(at: now) else {
                        Issue.record(Comment(rawValue: "a tick differs" + "\n" + context))
                        return
                    }
                }
                for id in Self.accessories {
                    guard everything.state(of: id) == withoutB.state(of: id) else {
                        Issue.record(Comment(rawValue: "\(id)'s state differs" + "\n" + context))
                        return
                    }
                }
            }
        }
    }
}
