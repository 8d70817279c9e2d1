import Foundation
import Logging
import MQTTClient
import Synchronization
import TestSupport

/// A failed wait in a test.
struct TimeoutError: Error, CustomStringConvertible {
    var description: String
}

/// Runs `body`, cancelling it and throwing after `timeout`.
func withTimeout<T: Sendable>(
    _ timeout: Duration, _ what: String, _ body: @escaping @Sendable () async throws -> T
) async throws -> T {
    try await withThrowingTaskGroup(of: T.self) { group in
        group.addTask { try await body() }
        group.addTask {
            try await Task.sleep(for: timeout)
            throw TimeoutError(description: "\(what) did not happen within \(timeout)")
        }
        defer { group.cancelAll() }
        return try await group.next()!
    }
}

/// Runs `body`, then closes `client`, also when `body` throws: a client released without close() asserts in a debug
/// build, which would end every test of the run.
func closing<T>(_ client: MQTTClient, _ body: () async throws -> T) async throws -> T {
    do {
        let result = try await body()
        await client.close()
        return result
    } catch {
        await client.close()
        throw error
    }
}

/// Quiet unless `MQTT_TEST_LOG_LEVEL` (trace, debug, info, ...) is set.
let testLogger: Logger = {
    guard let name = ProcessInfo.processInfo.environment["MQTT_TEST_LOG_LEVEL"], let level = Logger.Level(rawValue: name)
    else { return Logger(label: "MQTTClientTests", factory: { _ in SwiftLogNoOpLogHandler() }) }
    var logger = Logger(label: "MQTTClientTests", factory: { label in StreamLogHandler.standardError(label: label) })
    logger.logLevel = level
    return logger
}()

/// What a client received: its messages and events, recorded from the network thread.
final class Inbox: Sendable {
    private let state = Mutex<(messages: [MQTTMessage], events: [MQTTEvent])>(([], []))

    func receive(_ message: MQTTMessage) {
        state.withLock { $0.messages.append(message) }
    }

    func record(_ event: MQTTEvent) {
        state.withLock { $0.events.append(event) }
    }

    var messages: [MQTTMessage] { state.withLock { $0.messages } }
    var events: [MQTTEvent] { state.withLock { $0.events } }

    func messages(on topic: String) -> [MQTTMessage] {
        messages.filter { $0.topic == topic }
    }

    /// Waits until `count` messages (on `topic`, when given) have arrived, and returns them.
    func waitForMessages(
        count: Int, on topic: String? = nil, timeout: Duration = .seconds(10)
    ) async throws -> [MQTTMessage] {
        let deadline = ContinuousClock.now + timeout
        while true {
            let matching = messages.filter { topic == nil || $0.topic == topic }
            if matching.count >= count { return matching }
            guard ContinuousClock.now < deadline else {
                throw TimeoutError(
                    description: "\(count) messages\(topic.map { " on \($0)" } ?? "") did not arrive within \(timeout); "
                        + "got \(matching.count); events: \(events)"
                )
            }
            try await Task.sleep(for: .milliseconds(10))
        }
    }

    /// Waits until `count` events match `predicate`, and returns the matching ones.
    @discardableResult
    func waitForEvents(
        count: Int = 1, timeout: Duration = .seconds(10), _ predicate: (MQTTEvent) -> Bool
    ) async throws -> [MQTTEvent] {
        let deadline = ContinuousClock.now + timeout
        while true {
            let matching = events.filter(predicate)
            if matching.count >= count { return matching }
            guard ContinuousClock.now < deadline else {
                throw TimeoutError(description: "expected events did not happen within \(timeout); events: \(events)")
            }
            try await Task.sleep(for: .milliseconds(10))
        }
    }
}

extension MQTTEvent {
    var isConnected: Bool {
        if case .connected = self { true } else { false }
    }

    var lostConnectionError: MQTTError? {
        if case .disconnected(let error?) = self { error } else { nil }
    }

    var refusal: MQTTError? {
        if case .connectionRefused(let error) = self { error } else { nil }
    }
}

/// An ``MQTTClient`` on a test broker, recording into an ``Inbox``; quick to reconnect. Closed when it goes away, so
/// that a test that throws midway leaves nothing running.
final class TestClient: Sendable {
    let client: MQTTClient
    let inbox: Inbox
    let clientID: String
    let broker: MosquittoBroker

    init(
        _ broker: MosquittoBroker, clientID: String = "test-\(UUID().uuidString.prefix(8))",
        configure: (inout MQTTConfiguration) -> Void = { _ in }
    ) throws {
        var configuration = MQTTConfiguration(clientID: clientID)
        configuration.host = broker.host
        configuration.port = broker.port
        configuration.reconnectDelay = .milliseconds(100)
        configuration.maximumReconnectDelay = .seconds(1)
        configure(&configuration)
        self.client = try MQTTClient(configuration: configuration, logger: testLogger)
        self.inbox = Inbox()
        self.clientID = clientID
        self.broker = broker
    }

    deinit {
        client.syncClose()
    }

    /// Starts the client, recording into the inbox.
    func start() throws {
        let inbox = inbox
        try client.start(onEvent: { inbox.record($0) }, onMessage: { inbox.receive($0) })
    }

    /// Starts and waits for the first connection.
    func connect(timeout: Duration = .seconds(10)) async throws {
        try start()
        let client = self.client
        try await withTimeout(timeout, "connecting") { try await client.waitUntilConnected() }
    }

    /// Subscribes, and waits until the broker has registered the subscription (its log line
    /// `<client id> <qos> <filter>`); the client must be connected.
    func subscribe(_ filter: String, qos: QoS = .atLeastOnce, noLocal: Bool = false) async throws {
        let offset = broker.logLength
        try client.subscribe(filter, qos: qos, noLocal: noLocal)
        try await broker.waitForLog("\(clientID) \(qos.rawValue) \(filter)", after: offset)
    }
}

extension MQTTMessage {
    var text: String { String(decoding: payload, as: UTF8.self) }
}
