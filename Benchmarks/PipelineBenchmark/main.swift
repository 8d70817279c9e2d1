// Pushes encoded telemetry through the bridge's pure pipeline on one core and reports messages per second:
//
//   topic parse → format detection → reading the telemetry (WireCodec.readTelemetry, as the bridge does) →
//   AccessoryStateMachine →
//   RoutingEngine → encode the retained AccessoryState, the RequestResult carrying it and every SwitchCommand
//   (OutboundEncoder, as the bridge does for protobuf).
//
// Usage: swift run -c release pipeline-benchmark [messages=2000000] [accessories=10000] [rounds=5] [--stages]
//
// Each accessory is registered with both capabilities and has its own playing source (MEDIA), so placement reports
// route, pause and resume: every stage of the pipeline does real work.

import AccessoryModel
import AccessoryWire
import Foundation

let arguments = CommandLine.arguments.dropFirst().compactMap { Int($0) }  // `--stages` is not a number
let messageCount = arguments.count > 0 ? arguments[0] : 2_000_000
let accessoryCount = arguments.count > 1 ? arguments[1] : 10_000
let rounds = arguments.count > 2 ? arguments[2] : 5

let root = TopicRoot.default
let hub = HubID("hub-1")!
let codec = WireCodec()
let start = Timestamp(unixMilliseconds: 1_763_790_000_000)

struct Inbound {
    var topic: String
    var payload: [UInt8]
}

/// The stream: for each accessory in turn, a placement report (alternately on and off the head) and, every fourth
/// visit, a sources report (the same sources, so the route stays).
func makeStream(accessories: [AccessoryID], sources: [BluetoothAddress]) -> [Inbound] {
    let visits = 8
    var stream: [Inbound] = []
    stream.reserveCapacity(accessories.count * visits)
    for visit in 0..<visits {
        for (index, accessory) in accessories.enumerated() {
            let request: AccessoryRequest =
                visit % 4 == 3
                ? .sources(primary: sources[index].data, secondary: nil)
                : .placement(visit % 2 == 0 ? .onHead : .offHead)
            let telemetry = Audioaccessory_V1_AccessoryTelemetry(request, requestID: "r\(visit)")
            stream.append(
                Inbound(
                    topic: Topic.telemetry(hub: hub, accessory: accessory).name(under: root),
                    payload: codec.encode(telemetry, as: .protobuf)))
        }
    }
    return stream
}

let accessories = (0..<accessoryCount).map { AccessoryID("acc-\($0)")! }
let sources = (0..<accessoryCount).map { BluetoothAddress(rawValue: 0x0200_0000_0000 + UInt64($0))! }
let stream = makeStream(accessories: accessories, sources: sources)

/// An accessory's state machine behind a reference, as the bridge keeps each in its own actor.
final class Lane {
    var machine: AccessoryStateMachine
    /// Where the routing engine keeps the accessory, as the bridge's lanes remember it.
    var routingSlot: Int?
    init(_ machine: AccessoryStateMachine) { self.machine = machine }
}

/// Every accessory paired, registered with both capabilities and connected to its own source.
func makeLanes() -> [AccessoryID: Lane] {
    var lanes: [AccessoryID: Lane] = [:]
    for (index, accessory) in accessories.enumerated() {
        var machine = AccessoryStateMachine(id: accessory)
        _ = try! machine.apply(.paired(name: "Bench", model: "B", hardwareCapabilities: .all), from: hub, at: start)
        _ = try! machine.apply(.register(.all), from: hub, at: start)
        _ = try! machine.apply(.sources(primary: sources[index].data, secondary: nil), from: hub, at: start)
        lanes[accessory] = Lane(machine)
    }
    return lanes
}

/// A routing engine in which every source plays media.
func makeRouting() -> RoutingEngine {
    var routing = RoutingEngine(instanceID: "bench")
    for source in sources {
        _ = routing.sourceReported(SourceReport(activity: .media), from: source, at: start)
    }
    return routing
}

/// One round: fresh state, setup untimed, then `messageCount` messages timed.
func runRound() -> (seconds: Double, commands: Int, bytes: Int) {
    let lanes = makeLanes()
    var routing = makeRouting()

    var commands = 0
    var bytes = 0
    let clock = ContinuousClock()
    let began = clock.now
    for index in 0..<messageCount {
        let inbound = stream[index % stream.count]
        let now = Timestamp(unixMilliseconds: start.unixMilliseconds + Int64(index / 1000))
        guard case .telemetry(let from, let accessory) = try! Topic(parsing: inbound.topic, under: root) else {
            fatalError("not telemetry")
        }
        let format = try! PayloadFormat.detect(contentType: nil, payload: inbound.payload)
        let telemetry = try! codec.readTelemetry(from: inbound.payload, format: format, for: accessory)
        let request = try! telemetry.request.get()
        let lane = lanes[accessory]!
        let updated = try! lane.machine.apply(request, sequence: telemetry.sequence, from: from, at: now)
        let output = routing.accessoryChanged(RoutingAccessory(updated), at: now, slotHint: lane.routingSlot)
        lane.routingSlot = output.accessorySlot

        let state = OutboundEncoder.encodeState(updated, routedSource: output.routedSource)
        let result = OutboundEncoder.encodeResult(
            requestID: telemetry.requestID, sequence: telemetry.sequence, error: nil, state: state)
        bytes += state.count + result.count
        for command in output.commands {
            bytes += OutboundEncoder.encodeCommand(command).count
        }
        commands += output.commands.count
    }
    return (began.duration(to: clock.now).seconds, commands, bytes)
}

extension Duration {
    var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}

/// Times each stage alone over the same stream, to show where the time goes.
func runStages() {
    let clock = ContinuousClock()
    let n = min(messageCount, stream.count)
    func time(_ name: String, _ body: () -> Int) {
        let began = clock.now
        let sink = body()
        let ns = began.duration(to: clock.now).seconds * 1e9 / Double(n)
        print(name.padding(toLength: 42, withPad: " ", startingAt: 0) + String(format: "%6.0f ns/message", ns), sink == -1 ? "" : "")
    }
    var parsed: [AccessoryID] = []
    time("topic parse") {
        parsed = stream.prefix(n).map { inbound in
            guard case .telemetry(_, let accessory) = try! Topic(parsing: inbound.topic, under: root) else { fatalError() }
            return accessory
        }
        return parsed.count
    }
    var requests: [AccessoryRequest] = []
    time("format detection + read telemetry") {
        requests = zip(stream.prefix(n), parsed).map { inbound, accessory in
            let format = try! PayloadFormat.detect(contentType: nil, payload: inbound.payload)
            return try! codec.readTelemetry(from: inbound.payload, format: format, for: accessory).request.get()
        }
        return requests.count
    }
    time("for comparison: swift-protobuf's") {
        zip(stream.prefix(n), parsed).reduce(0) { total, pair in
            let telemetry = try! codec.decode(Audioaccessory_V1_AccessoryTelemetry.self, from: pair.0.payload, format: .protobuf)
            return total + (try! telemetry.request(for: pair.1)).name.utf8.count
        }
    }
    let lanes = makeLanes()
    var updated: [Accessory] = []
    var applied: [Lane] = []
    updated.reserveCapacity(n)
    applied.reserveCapacity(n)
    time("AccessoryStateMachine.apply") {
        for (request, accessory) in zip(requests, parsed) {
            let lane = lanes[accessory]!
            updated.append(try! lane.machine.apply(request, from: hub, at: start))
            applied.append(lane)
        }
        return updated.count
    }
    var routing = makeRouting()
    var outputs: [RoutingOutput] = []
    time("RoutingEngine.accessoryChanged") {
        outputs = zip(updated, applied).map { accessory, lane in
            let output = routing.accessoryChanged(RoutingAccessory(accessory), at: start, slotHint: lane.routingSlot)
            lane.routingSlot = output.accessorySlot
            return output
        }
        return outputs.count
    }
    var states: [[UInt8]] = []
    time("encode AccessoryState (OutboundEncoder)") {
        states = zip(updated, outputs).map { OutboundEncoder.encodeState($0, routedSource: $1.routedSource) }
        return states.count
    }
    time("encode RequestResult with the state") {
        states.reduce(0) { $0 + OutboundEncoder.encodeResult(requestID: "r1", sequence: 0, error: nil, state: $1).count }
    }
    time("for comparison: swift-protobuf's own") {
        zip(updated, outputs).reduce(0) {
            $0 + codec.encode(Audioaccessory_V1_AccessoryState($1.0, routedSource: $1.1.routedSource),
                as: .protobuf).count
        }
    }
    time("encode SwitchCommands") {
        outputs.reduce(0) { total, output in
            total + output.commands.reduce(0) { $0 + OutboundEncoder.encodeCommand($1).count }
        }
    }
}

if CommandLine.arguments.contains("--stages") {
    print("pipeline-benchmark --stages: \(min(messageCount, stream.count)) messages, each stage alone")
    runStages()
    exit(0)
}

print("pipeline-benchmark: \(messageCount) telemetry messages, \(accessoryCount) accessories, \(rounds) rounds, 1 thread")
var rates: [Double] = []
for round in 1...rounds {
    let (seconds, commands, bytes) = runRound()
    let rate = Double(messageCount) / seconds
    rates.append(rate)
    print(
        String(
            format: "round %d: %.3f s, %.0f messages/s, %.0f ns/message, %d commands, %.1f MB encoded",
            round, seconds, rate, 1e9 / rate, commands, Double(bytes) / 1e6))
}
rates.sort()
print(String(format: "median: %.0f messages/s (best %.0f)", rates[rates.count / 2], rates.last!))
