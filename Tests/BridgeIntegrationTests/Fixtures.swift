import AccessoryBridge
import AccessoryModel
@testable import AccessoryWire
import CoreMetrics
import Foundation
import Logging
import MQTTClient
import ServiceLifecycle
import Synchronization
import TestSupport

/// The real bridge service, in this process, in one ServiceGroup, against a broker.
final class RunningBridge: Sendable {
    private let group: ServiceGroup
    private let task: Task<Void, any Error>

    init(
        broker: MosquittoBroker, metrics: any MetricsFactory = NOOPMetricsHandler.instance,
        logs: LogRecorder? = nil, configure: (inout BridgeConfiguration) -> Void = { _ in }
    ) throws {
        var mqtt = MQTTConfiguration(clientID: "bridge-\(UUID().uuidString.prefix(8))")
        mqtt.port = broker.port
        mqtt.reconnectDelay = .milliseconds(100)
        mqtt.maximumReconnectDelay = .seconds(1)
        var configuration = BridgeConfiguration(mqtt: mqtt)
        configuration.statisticsInterval = .milliseconds(200)
        configure(&configuration)
        var logger = logs.map { logs in Logger(label: "bridge") { _ in logs } } ?? Logger(label: "bridge")
        logger.logLevel = logs == nil ? .warning : .debug
        let bridge = try AccessoryBridgeService(
            configuration: configuration, logger: logger, metrics: metrics, instanceID: "it")
        let group = ServiceGroup(configuration: .init(services: [bridge], logger: logger))
        self.group = group
        task = Task { try await group.run() }
    }

    deinit {
        // A test that throws before stop() still ends its bridge (cancelling the group closes its connection): it
        // must not go on reconnecting to a port another test's broker may take.
        task.cancel()
    }

    /// Graceful shutdown, as SIGTERM would do it.
    func stop() async throws {
        await group.triggerGracefulShutdown()
        try await task.value
    }
}

/// An MQTT peer of the tests: a hub, a playing device or an observer. Records what it receives.
final class Peer: Sendable {
    let client: MQTTClient
    let root = TopicRoot.default
    let codec = WireCodec()
    private let inbox = Inbox()
    private let name: String

    private final class Inbox: Sendable {
        let messages = Mutex<[MQTTMessage]>([])
    }

    init(_ name: String, broker: MosquittoBroker, subscribe filters: [String] = []) async throws {
        self.name = name
        var mqtt = MQTTConfiguration(clientID: "\(name)-\(UUID().uuidString.prefix(8))")
        mqtt.port = broker.port
        var logger = Logger(label: name)
        logger.logLevel = .warning
        let inbox = inbox
        client = try MQTTClient(configuration: mqtt, logger: logger)
        let readiness = "test/ready/\(name)/\(UUID().uuidString.prefix(8))"
        for filter in filters + [readiness] {
            try client.subscribe(filter, qos: .atLeastOnce)
        }
        try client.start { message in inbox.messages.withLock { $0.append(message) } }
        try await client.waitUntilConnected(timeout: .seconds(20))
        // The subscriptions are in place once a message of our own comes back through them.
        try client.publish(MQTTMessage(topic: readiness, payload: [1]))
        _ = try await waitFor(1, on: readiness)
    }

    func close() async {
        await client.close()
    }

    deinit {
        // A test that throws midway leaves its peers behind: closing is idempotent.
        client.syncClose()
    }

    /// Every message received so far, in the order it arrived.
    func everything() -> [MQTTMessage] {
        inbox.messages.withLock { $0 }
    }

    /// Every message received so far on `topic`.
    func messages(on topic: String) -> [MQTTMessage] {
        inbox.messages.withLock { $0.filter { $0.topic == topic } }
    }

    /// Waits until `count` messages arrived on `topic`, and returns them.
    /// (A generous default: what must arrive costs nothing to wait for, and a machine running every suite at once is
    /// slow: under `make test-stress`, a bridge just started had not said it was online after 15 s, the default
    /// until 2026-11-30.)
    func waitFor(_ count: Int, on topic: String, timeout: Duration = .seconds(30)) async throws -> [MQTTMessage] {
        let deadline = ContinuousClock.now + timeout
        while true {
            let messages = messages(on: topic)
            if messages.count >= count { return messages }
            // Looked once more after the deadline: a task that could not run for a while (a busy machine) must not
            // report as missing what arrived meanwhile.
            guard ContinuousClock.now < deadline else { break }
            try await Task.sleep(for: .milliseconds(20))
        }
        throw Timeout(description: "\(name): \(messages(on: topic).count) of \(count) messages on \(topic)")
    }

    struct Timeout: Error, CustomStringConvertible {
        var description: String
    }

    // MARK: Acting as a hub

    /// Sends telemetry and waits for its result on the hub's result topic.
    @discardableResult
    func request(
        _ request: AccessoryRequest, hub: String = "hub-1", accessory: String = "headphones", sequence: UInt64 = 0,
        format: PayloadFormat = .protobuf, properties: MQTTProperties = .none
    ) async throws -> Audioaccessory_V1_RequestResult {
        let resultTopic = "audio/hubs/\(hub)/accessories/\(accessory)/result"
        let before = messages(on: resultTopic).count
        let telemetry = Audioaccessory_V1_AccessoryTelemetry(request, sequence: sequence, requestID: "req-\(sequence)")
        var properties = properties
        properties.contentType = format.contentType
        try client.publish(
            MQTTMessage(
                topic: "audio/hubs/\(hub)/accessories/\(accessory)/telemetry", payload: codec.encode(telemetry, as: format),
                properties: properties))
        let result = try await waitFor(before + 1, on: resultTopic)[before]
        return try codec.decode(Audioaccessory_V1_RequestResult.self, from: result.payload, format: format)
    }

    // MARK: Acting as a playing device

    func report(_ activity: Activity, source: BluetoothAddress, headTracking: Bool = false) throws {
        let state = Audioaccessory_V1_SourceState(SourceReport(activity: activity, headTracking: headTracking))
        try client.publish(
            MQTTMessage(
                topic: Topic.sourceState(source: source).name(under: root), payload: codec.encode(state, as: .protobuf),
                retain: true))
    }

    /// The commands received for `source`, decoded.
    func commands(for source: BluetoothAddress) throws -> [Audioaccessory_V1_SwitchCommand] {
        try messages(on: Topic.sourceCommands(source: source).name(under: root)).map {
            try codec.decode(Audioaccessory_V1_SwitchCommand.self, from: $0.payload, format: .protobuf)
        }
    }

    /// Waits for `count` commands for `source`, and returns them decoded.
    func waitForCommands(_ count: Int, for source: BluetoothAddress) async throws -> [Audioaccessory_V1_SwitchCommand] {
        _ = try await waitFor(count, on: Topic.sourceCommands(source: source).name(under: root))
        return try commands(for: source)
    }
}

