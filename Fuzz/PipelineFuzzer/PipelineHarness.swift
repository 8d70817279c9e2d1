import AccessoryBridge
import AccessoryModel
import AccessoryWire
import CoreMetrics
import Foundation
import Logging
import MQTTClient
import Synchronization

/// Runs one fuzz input (see ``FuzzInput``) through a fresh ``MessageProcessor``: topic → payload format → protobuf
/// or JSON decoding → the accessory model → the routing engine → what the bridge publishes, checked by an
/// ``InvariantChecker``. Nothing outlives the call, so an input replays the same way alone and in a run.
enum PipelineHarness {
    static let root = TopicRoot.default
    static let start = Timestamp(unixMilliseconds: 1_763_790_000_000)
    static let logger = Logger(label: "pipeline-fuzzer", factory: { _ in SwiftLogNoOpLogHandler() })

    static func configuration(defaultFormat: PayloadFormat) -> BridgeConfiguration {
        var configuration = BridgeConfiguration(mqtt: MQTTConfiguration(clientID: "pipeline-fuzzer"))
        configuration.topicRoot = root
        configuration.payloadFormat = defaultFormat
        // Small enough that inputs of libFuzzer's -max_len reach the size limit.
        configuration.maximumPayloadSize = 1024
        return configuration
    }

    static let configurations = (
        protobuf: configuration(defaultFormat: .protobuf), json: configuration(defaultFormat: .json)
    )

    static func run(_ bytes: UnsafeRawBufferPointer) {
        var input = FuzzInput(bytes)
        guard let header = input.byte() else { return }
        let configuration = header & 2 == 0 ? configurations.protobuf : configurations.json
        let clock = FuzzClock(start)
        let checker = InvariantChecker(
            root: root, defaultFormat: configuration.payloadFormat, gracePeriod: configuration.policy.accessory.diagnosticsGracePeriod,
            clock: clock)
        let processor = MessageProcessor(
            configuration: configuration, instanceID: "fuzz", publisher: checker, clock: clock.wallClock,
            logger: logger, metrics: NOOPMetricsHandler.instance)

        if header & 4 != 0 {
            restore(&input, processor, checker)
        }
        if header & 1 != 0 {
            for message in setUp {
                handle(message, processor, checker)
            }
        }
        while let op = input.byte() {
            switch op & 7 {
            case 0, 1, 2:
                let hub = FuzzInput.hubs[Int(op >> 3 & 1)]
                let accessory = FuzzInput.accessories[Int(op >> 4 & 3)]
                guard let message = message(Topic.telemetry(hub: hub, accessory: accessory), &input) else { return }
                handle(message, processor, checker)
            case 3:
                let hub = FuzzInput.hubs[Int(op >> 3 & 1)]
                guard let message = message(Topic.hubStatus(hub: hub), &input) else { return }
                handle(message, processor, checker)
            case 4:
                let source = FuzzInput.sources[Int(op >> 3 & 3)]
                guard let message = message(Topic.sourceState(source: source), &input) else { return }
                handle(message, processor, checker)
            case 5:
                guard let amount = input.byte() else { return }
                let step: Duration = amount < 128 ? .milliseconds(100 * Int(amount)) : .seconds(2 * Int(amount - 128))
                clock.advance(step)
                checker.step(.other, { "tick() after \(step)" }) { processor.tick() }
            case 6:
                guard let content = input.byte() else { return }
                let name = String(decoding: input.slice(), as: UTF8.self)
                let topic = op & 8 == 0 ? "\(root)/\(name)" : name
                let message = MQTTMessage(
                    topic: topic, payload: input.slice(), properties: FuzzInput.properties(content))
                handle(message, processor, checker)
            default:
                guard let amount = input.byte() else { return }
                clock.advance(.milliseconds(-10 * Int(amount)))
                checker.step(.other, { "tick() after the clock stepped back \(10 * Int(amount)) ms" }) {
                    processor.tick()
                }
            }
        }
    }

    /// A message on `topic` with the content byte and payload slice that come next; `nil` at the end of the input.
    private static func message(_ topic: Topic, _ input: inout FuzzInput) -> MQTTMessage? {
        guard let content = input.byte() else { return nil }
        return MQTTMessage(
            topic: topic.name(under: root), payload: input.slice(), properties: FuzzInput.properties(content))
    }

    private static func handle(_ message: MQTTMessage, _ processor: MessageProcessor, _ checker: InvariantChecker) {
        let step: InvariantChecker.Step
        if case .telemetry(let hub, let accessory)? = try? Topic(parsing: message.topic, under: root) {
            step = .telemetry(hub: hub, accessory: accessory, properties: message.properties)
        } else {
            step = .other
        }
        checker.step(step, { describe(message) }) { processor.handle(message) }
    }

    /// Retained states read back at start-up, before any telemetry.
    private static func restore(_ input: inout FuzzInput, _ processor: MessageProcessor, _ checker: InvariantChecker) {
        var accessoryStates: [MQTTMessage] = []
        var sourceStates: [MQTTMessage] = []
        for _ in 0..<Int((input.byte() ?? 0) & 3) {
            guard let selector = input.byte(), let content = input.byte() else { break }
            let index = Int(selector >> 1 & 3)
            let topic =
                selector & 1 == 0
                ? Topic.accessoryState(accessory: FuzzInput.accessories[index])
                : Topic.sourceState(source: FuzzInput.sources[index])
            let message = MQTTMessage(
                topic: topic.name(under: root), payload: input.slice(), retain: true,
                properties: FuzzInput.properties(content))
            if selector & 1 == 0 { accessoryStates.append(message) } else { sourceStates.append(message) }
        }
        checker.step(.restoring, { [accessoryStates, sourceStates] in
            "restore of \(accessoryStates.map(describe)) and \(sourceStates.map(describe))"
        }) {
            for message in sourceStates + accessoryStates { processor.restore(message) }
            processor.restoringFinished()
        }
    }

    /// Two accessories on hub-1 paired, registered with every capability and connected to sources (sharing
    /// 123456789abc), which plays media: the model and routing code past validation is one placement away.
    static let setUp: [MQTTMessage] = {
        let codec = WireCodec()
        let hub = FuzzInput.hubs[0]
        let (a, b, c) = (FuzzInput.sources[0], FuzzInput.sources[1], FuzzInput.sources[2])
        var messages: [MQTTMessage] = []
        for (accessory, secondary) in [(FuzzInput.accessories[0], b), (FuzzInput.accessories[1], c)] {
            let requests: [AccessoryRequest] = [
                .paired(name: "Fuzz \(accessory)", model: "F-1", hardwareCapabilities: .all),
                .register(.all),
                .sources(primary: a.data, secondary: secondary.data),
            ]
            for (index, request) in requests.enumerated() {
                messages.append(
                    MQTTMessage(
                        topic: Topic.telemetry(hub: hub, accessory: accessory).name(under: root),
                        payload: codec.encodeTelemetry(
                            request, sequence: UInt64(index + 1), requestID: "setup-\(index + 1)", as: .protobuf),
                        properties: MQTTProperties(contentType: PayloadFormat.protobuf.contentType)))
            }
        }
        let media = SourceReport(sequence: 1, activity: .media)
        messages.append(
            MQTTMessage(
                topic: Topic.sourceState(source: a).name(under: root), payload: codec.encode(media, as: .protobuf)))
        return messages
    }()

    private static func describe(_ message: MQTTMessage) -> String {
        "\(message.topic) content-type=\(message.properties.contentType ?? "-") "
            + "response-topic=\(message.properties.responseTopic ?? "-") payload=\(message.payload.hexString)"
    }
}

/// The bridge's wall clock, moved by the input.
final class FuzzClock: Sendable {
    private let time: Mutex<Timestamp>

    init(_ start: Timestamp) {
        time = Mutex(start)
    }

    var now: Timestamp { time.withLock { $0 } }

    var wallClock: WallClock { WallClock { self.now } }

    func advance(_ duration: Duration) {
        time.withLock { $0 = $0 + duration }
    }
}
