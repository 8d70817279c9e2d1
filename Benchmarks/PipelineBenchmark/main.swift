// Pushes telemetry through the bridge's whole message path without a broker, on one core, and reports messages per
// second: MessageProcessor (topic, payload format, decoding) → BridgeStateMachine (the accessory's model, routing)
// → the state, result and commands encoded and handed to a publisher that only counts them.
//
// What users feel is end to end through a broker (`make bench-e2e`); this shows how small a part of it the bridge's
// own work is.
//
// Usage: pipeline-benchmark [messages=1000000] [accessories=10000] [rounds=5] [--no-home-automation]
//        pipeline-benchmark --memory [accessories=100000] [--no-home-automation]: the memory each accessory costs
//        once set up (the process's RSS before and after, each placed on a head); each lists an idle source of its
//        own, as with Benchmarks/LoadGen --own-sources in `make bench-memory`. One measurement per process: memory
//        freed by one would be reused by the next. Then how long the network thread's housekeeping (statistics,
//        every 10 s) takes with that many.
//        pipeline-benchmark --restore [accessories=100000] [--no-home-automation]: a restart's rebuild without a
//        broker: the retained messages such a set-up leaves that a restarted bridge reads, decoded, then taken back
//        by a fresh processor (three times), each step timed.
//
// Each accessory is registered with both capabilities and has its own playing source (MEDIA), so placement reports
// route, pause and resume: every stage of the path does real work.

import AccessoryBridge
import AccessoryModel
import AccessoryWire
import Foundation
import Logging
import MQTTClient
import Metrics
import Synchronization

let memoryMode = CommandLine.arguments.dropFirst().first == "--memory"
let restoreMode = CommandLine.arguments.dropFirst().first == "--restore"
let homeAutomation = !CommandLine.arguments.contains("--no-home-automation")
let arguments = CommandLine.arguments.dropFirst().compactMap { Int($0) }
let messageCount = arguments.count > 0 ? arguments[0] : 1_000_000
let accessoryCount = arguments.count > 1 ? arguments[1] : 10_000
let rounds = arguments.count > 2 ? arguments[2] : 5

let root = TopicRoot.default
let codec = WireCodec()
let idCount = memoryMode || restoreMode ? arguments.max() ?? 100_000 : accessoryCount
let accessories = (0..<idCount).map { AccessoryID("acc-\($0)")! }
let sources = (0..<idCount).map { BluetoothAddress(rawValue: 0x0200_0000_0000 + UInt64($0))! }

/// Counts what the bridge publishes.
final class CountingPublisher: MessagePublisher {
    // One bridge reads every playing device through one filter.
    func subscribe(_ filter: String) throws(MQTTError) {}
    func unsubscribe(_ filter: String) throws(MQTTError) {}

    let messages = Atomic(0)
    let bytes = Atomic(0)
    /// With `keepingRetained`, the last retained message on each topic: what a broker would hand a restarted bridge.
    let retained: Mutex<[String: MQTTMessage]>?

    init(keepingRetained: Bool = false) {
        retained = keepingRetained ? Mutex([:]) : nil
    }

    func send(_ message: MQTTMessage) throws(MQTTError) {
        messages.add(1, ordering: .relaxed)
        bytes.add(message.payload.count, ordering: .relaxed)
        if message.retain { retained?.withLock { $0[message.topic] = message } }
    }
}

func telemetry(_ request: AccessoryRequest, _ index: Int, sequence: UInt64) -> MQTTMessage {
    MQTTMessage(
        topic: Topic.telemetry(hub: HubID("hub-1")!, accessory: accessories[index]).name(under: root),
        payload: codec.encodeTelemetry(request, sequence: sequence, requestID: "r\(sequence)", as: .protobuf))
}

/// Placement reports for each accessory in turn, on the head on even visits and off on odd ones, numbered after the
/// set-up: every one changes its accessory, as LoadGen's reports do in `make bench-e2e`.
func visit(_ visit: Int) -> [MQTTMessage] {
    (0..<accessoryCount).map {
        telemetry(.placement(visit % 2 == 0 ? .onHead : .offHead), $0, sequence: UInt64(4 + visit))
    }
}

/// The time the bridge sees: it does not move, so every run decides the same.
let benchmarkTime = Timestamp(unixMilliseconds: 1_763_790_000_000)

/// A processor with `count` accessories paired, registered and connected to their own source, which plays media
/// (or, with `idleSources`, has never reported).
func setUp(
    _ count: Int, homeAutomation: Bool = true, idleSources: Bool = false, publisher: CountingPublisher
) -> MessageProcessor {
    var logger = Logger(label: "bench")
    logger.logLevel = .critical
    var configuration = BridgeConfiguration(mqtt: MQTTConfiguration(clientID: "bench"))
    configuration.homeAutomation = homeAutomation
    let processor = MessageProcessor(
        configuration: configuration, instanceID: "bench",
        publisher: publisher, clock: WallClock { benchmarkTime }, logger: logger,
        metrics: NOOPMetricsHandler.instance)
    for index in 0..<count {
        let source = sources[index]
        processor.handle(telemetry(.paired(name: "Bench", model: "B", hardwareCapabilities: .all), index, sequence: 1))
        processor.handle(telemetry(.register(.all), index, sequence: 2))
        processor.handle(telemetry(.sources(primary: source.data, secondary: nil), index, sequence: 3))
        guard !idleSources else { continue }
        let state = SourceReport(activity: .media)
        processor.handle(
            MQTTMessage(
                topic: Topic.sourceState(source: source).name(under: root),
                payload: codec.encode(state, as: .protobuf)))
    }
    return processor
}

func runRound() -> (seconds: Double, published: Int, bytes: Int) {
    let publisher = CountingPublisher()
    let processor = setUp(accessoryCount, homeAutomation: homeAutomation, publisher: publisher)
    let before = (publisher.messages.load(ordering: .relaxed), publisher.bytes.load(ordering: .relaxed))
    let clock = ContinuousClock()
    var elapsed = Duration.zero
    var handled = 0
    var number = 0
    while handled < messageCount {
        // Each visit's messages are made before its clock starts.
        let messages = visit(number).prefix(messageCount - handled)
        let began = clock.now
        for message in messages { processor.handle(message) }
        elapsed += began.duration(to: clock.now)
        handled += messages.count
        number += 1
    }
    let seconds = elapsed.seconds
    return (
        seconds, publisher.messages.load(ordering: .relaxed) - before.0,
        publisher.bytes.load(ordering: .relaxed) - before.1
    )
}

extension Duration {
    var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}

/// The process's resident memory, in bytes (/proc/self/status).
func residentBytes() -> Int {
    let status = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) ?? ""
    let line = status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") } ?? ""
    return (Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0) * 1024
}

if memoryMode {
    let count = arguments.first ?? 100_000
    let before = residentBytes()
    let processor = setUp(
        count, homeAutomation: homeAutomation, idleSources: true, publisher: CountingPublisher())
    for index in 0..<count { processor.handle(telemetry(.placement(.onHead), index, sequence: 4)) }
    let bytes = residentBytes() - before
    print("\(count) accessories, home automation \(homeAutomation ? "on" : "off"): \(bytes / count) B each")
    // Then the housekeeping the network thread does every statistics interval, while messages wait.
    let walks = (1...3).map { _ in ContinuousClock().measure { processor.housekeeping() } }
    let milliseconds = walks.map { String(format: "%.1f ms", $0 / .milliseconds(1)) }
    print("housekeeping (statistics):", milliseconds.joined(separator: ", "))
    exit(0)
}

if restoreMode {
    // A restart's rebuild, the bridge's own part: the retained states a set-up left, decoded and taken back by a fresh
    // processor on one thread (the bridge decodes on its reader's thread while the processor restores, and the broker
    // sends them meanwhile: `make bench-rebuild` and `make bench-memory` measure all of it).
    let count = arguments.first ?? 100_000
    let publisher = CountingPublisher(keepingRetained: true)
    let processor = setUp(count, homeAutomation: homeAutomation, idleSources: true, publisher: publisher)
    for index in 0..<count { processor.handle(telemetry(.placement(.onHead), index, sequence: 4)) }
    // What the bridge's start-up reader subscribes to: accessories' and sources' states, and Home Assistant's
    // discovery configs (outside the root), not the views.
    let retained = publisher.retained!.withLock { Array($0.values) }.filter { message in
        switch try? Topic(parsing: message.topic, under: root) {
        case .accessoryState?, .sourceState?: true
        default: !message.topic.hasPrefix(root.rawValue + "/")
        }
    }
    for round in 1...3 {
        let restarted = setUp(0, homeAutomation: homeAutomation, publisher: CountingPublisher())
        var decoded: [MessageProcessor.RetainedMessage] = []
        decoded.reserveCapacity(retained.count)
        let clock = ContinuousClock()
        let decoding = clock.measure { for message in retained { decoded.append(restarted.decodeRetained(message)) } }
        let restoring = clock.measure {
            for message in decoded { restarted.restore(message) }
            restarted.restoringFinished()
        }
        let perMessage = { (duration: Duration) in
            String(format: "%.2f µs", duration / .microseconds(1) / Double(retained.count))
        }
        print(
            "restore \(round): \(retained.count) retained messages for \(count) accessories: decoding \(decoding)"
                + " (\(perMessage(decoding)) each), restoring \(restoring) (\(perMessage(restoring)) each)")
    }
    exit(0)
}

print("pipeline-benchmark: \(messageCount) telemetry messages, \(accessoryCount) accessories, \(rounds) rounds, 1 thread")
var rates: [Double] = []
for round in 1...rounds {
    let (seconds, published, bytes) = runRound()
    let rate = Double(messageCount) / seconds
    rates.append(rate)
    print(
        String(
            format: "round %d: %.3f s, %.0f messages/s, %.0f ns/message, %d published, %.1f MB",
            round, seconds, rate, 1e9 / rate, published, Double(bytes) / 1e6))
}
rates.sort()
print(String(format: "median: %.0f messages/s (best %.0f)", rates[rates.count / 2], rates.last!))
