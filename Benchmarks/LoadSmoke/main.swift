// Load smoke: acts as a hub with many accessories, publishes sequenced telemetry at QoS 1 as fast as the broker
// takes it, and counts the bridge's results: messages per second, and requests without a result (lost).
//
// Usage: load-smoke [broker=mqtt://127.0.0.1:1883] [messages=100000] [accessories=1000]
// scripts/load-smoke.sh starts a broker and a release bridge, runs this, and reports the bridge's peak RSS.

import AccessoryModel
import AccessoryWire
import Foundation
import Logging
import MQTTClient
import Synchronization

let arguments = Array(CommandLine.arguments.dropFirst())
let broker = try BrokerURL(parsing: arguments.first ?? "mqtt://127.0.0.1:1883")
let messageCount = arguments.count > 1 ? Int(arguments[1])! : 100_000
let accessoryCount = arguments.count > 2 ? Int(arguments[2])! : 1000
let root = TopicRoot.default
let hub = HubID("load-hub")!
let codec = WireCodec()
let accessories = (0..<accessoryCount).map { AccessoryID("load-\($0)")! }

/// Results by request number: how many arrived for each (0 = lost so far), and which failed.
final class Tally: Sendable {
    private struct State {
        var counts: [UInt8]
        var received = 0
        var failed = 0
        var firstFailure: String?
    }
    private let state: Mutex<State>
    init(capacity: Int) { state = Mutex(State(counts: Array(repeating: 0, count: capacity))) }

    func record(_ number: Int, error: AccessoryControlError?) {
        state.withLock { state in
            guard number < state.counts.count else { return }
            state.counts[number] &+= 1
            state.received += 1
            if let error {
                state.failed += 1
                state.firstFailure = state.firstFailure ?? "\(error)"
            }
        }
    }

    var received: Int { state.withLock { $0.received } }
    func summary(upTo count: Int) -> (lost: Int, duplicated: Int, failed: Int, firstFailure: String?) {
        state.withLock { state in
            let slice = state.counts[0..<count]
            return (slice.filter { $0 == 0 }.count, slice.filter { $0 > 1 }.count, state.failed, state.firstFailure)
        }
    }
}

let setupCount = accessoryCount * 2
let tally = Tally(capacity: setupCount + messageCount)
var mqtt = MQTTConfiguration(clientID: "load-smoke-\(UInt32.random(in: .min ... .max))")
mqtt.host = broker.host
mqtt.port = broker.port
mqtt.maximumInflightMessages = 1000
var logger = Logger(label: "load-smoke")
logger.logLevel = .warning
let client = try MQTTClient(configuration: mqtt, logger: logger)
try client.subscribe(Topic.Kind.result.filter(under: root), qos: .atLeastOnce)
try client.start { message in
    guard let result = try? codec.decode(Audioaccessory_V1_RequestResult.self, from: message.payload, format: .protobuf),
        let number = Int(result.requestID)
    else { return }
    tally.record(number, error: result.controlError)
}
try await client.waitUntilConnected()

var sequences = [UInt64](repeating: 0, count: accessoryCount)
@MainActor
func send(_ request: AccessoryRequest, to index: Int, number: Int) throws {
    sequences[index] += 1
    let telemetry = Audioaccessory_V1_AccessoryTelemetry(request, sequence: sequences[index], requestID: "\(number)")
    try client.publish(
        MQTTMessage(
            topic: Topic.telemetry(hub: hub, accessory: accessories[index]).name(under: root),
            payload: codec.encode(telemetry, as: .protobuf), qos: .atLeastOnce))
}

/// Waits until `target` results arrived, or no result arrived for `patience`.
func waitForResults(_ target: Int, patience: Duration = .seconds(15)) async {
    var last = tally.received
    var idleSince = ContinuousClock.now
    while tally.received < target {
        try? await Task.sleep(for: .milliseconds(50))
        let now = tally.received
        if now != last {
            last = now
            idleSince = .now
        } else if ContinuousClock.now - idleSince > patience {
            return
        }
    }
}

// Setup: pair and register every accessory (not timed).
for index in 0..<accessoryCount {
    try send(.paired(name: "Load \(index)", model: "L", hardwareCapabilities: .all), to: index, number: 2 * index)
    try send(.register(.all), to: index, number: 2 * index + 1)
}
await waitForResults(setupCount)
print("setup: \(tally.received) of \(setupCount) results for \(accessoryCount) accessories")

// The run: placement reports, alternately on and off the head, round robin over the accessories.
let clock = ContinuousClock()
let started = clock.now
for number in 0..<messageCount {
    let index = number % accessoryCount
    try send(.placement((number / accessoryCount) % 2 == 0 ? .onHead : .offHead), to: index, number: setupCount + number)
}
let published = clock.now
await waitForResults(setupCount + messageCount)
let finished = clock.now

let seconds = (finished - started).seconds
let (lost, duplicated, failed, firstFailure) = tally.summary(upTo: setupCount + messageCount)
print("published \(messageCount) telemetry messages in \(String(format: "%.2f", (published - started).seconds)) s")
print("results:  \(tally.received - setupCount) in \(String(format: "%.2f", seconds)) s = \(Int(Double(messageCount) / seconds)) messages/s end to end")
print("lost:     \(lost)   duplicated: \(duplicated)   failed: \(failed)\(firstFailure.map { " (first: \($0))" } ?? "")")
await client.close()
exit(lost == 0 && failed == 0 ? 0 : 1)

extension Duration {
    var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}
