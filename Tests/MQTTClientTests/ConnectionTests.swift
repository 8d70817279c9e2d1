import Foundation
import MQTTClient
import Synchronization
import Testing
import TestSupport

/// Connection lifecycle against a real mosquitto: outages, reconnection, wills, credentials, sessions, closing.
@Suite(.timeLimit(.minutes(2)))
struct ConnectionTests {
    enum Outage: String, CaseIterable, Sendable {
        /// SIGTERM: mosquitto says goodbye to its clients.
        case stop
        /// SIGKILL: the connections just break.
        case kill
    }

    @Test(arguments: Outage.allCases)
    func reconnectsAndResubscribesAfterBrokerRestart(_ outage: Outage) async throws {
        let broker = try await MosquittoBroker()
        let client = try TestClient(broker)
        try await client.connect()
        try await client.subscribe("restart/#")

        switch outage {
        case .stop: await broker.stop()
        case .kill: broker.kill()
        }
        let lost = try await client.inbox.waitForEvents { $0.lostConnectionError != nil }
        #expect(lost.first?.lostConnectionError?.kind == .disconnected)
        #expect(!client.client.isConnected)

        let offset = broker.logLength
        try await broker.restart()
        try await client.inbox.waitForEvents(count: 2) { $0.isConnected }
        #expect(client.client.isConnected)
        // Resubscribed by itself.
        try await broker.waitForLog("\(client.clientID) 1 restart/#", after: offset)
        try await broker.publish(topic: "restart/after", message: "back", qos: 1)
        let received = try await client.inbox.waitForMessages(count: 1)
        #expect(received.map(\.text) == ["back"])
        #expect(
            client.inbox.events.map { $0.isConnected ? "connected" : $0.lostConnectionError != nil ? "lost" : "other" }
                == ["connected", "lost", "connected"]
        )
    }

    /// A QoS 1 message the broker never acknowledged goes out again after reconnecting, and one published while the
    /// client was disconnected goes out behind it, not before: MQTT keeps a client's messages in order, and a hub's
    /// sequence numbers rely on it.
    @Test func aMessageInFlightWhenTheConnectionBrokeStaysAheadOfLaterOnes() async throws {
        // The broker's debug log shows each PUBLISH it receives, in order.
        let broker = try await MosquittoBroker(extraConfig: "log_type debug")
        let publisher = try TestClient(broker)
        try await publisher.connect()

        broker.signal(SIGSTOP)  // "first" reaches the broker's socket, and is never acknowledged
        try publisher.client.publish(MQTTMessage(topic: "order/first", payload: Array("1".utf8), qos: .atLeastOnce))
        try await Task.sleep(for: .milliseconds(200))
        broker.kill()
        try await publisher.inbox.waitForEvents { $0.lostConnectionError != nil }
        try publisher.client.publish(MQTTMessage(topic: "order/second", payload: Array("2".utf8), qos: .atLeastOnce))
        #expect(publisher.client.pendingMessages == 1, "it waits for the connection, behind \"first\"")

        let offset = broker.logLength
        try await broker.restart()
        try await broker.waitForLog("'order/first'", after: offset, timeout: .seconds(20))
        try await broker.waitForLog("'order/second'", after: offset, timeout: .seconds(20))
        let received = broker.log().dropFirst(offset).split(separator: "\n").filter { $0.contains("Received PUBLISH") }
        #expect(
            received.compactMap { $0.contains("'order/first'") ? "first" : $0.contains("'order/second'") ? "second" : nil }
                == ["first", "second"], "\(received)")
    }

    /// What a broker down at first relies on: no other test is handed its port meanwhile, nor does a connection
    /// take it as its local port.
    @Test func aFreePortIsHandedOutOnceAndOutsideTheEphemeralRange() throws {
        let ports = try (0..<200).map { _ in try MosquittoBroker.freePort() }
        #expect(Set(ports).count == ports.count)
        #expect(ports.allSatisfy(MosquittoBroker.portsOutsideTheEphemeralRange().contains))
    }

    @Test func connectsOnceTheBrokerStartsWhenItWasDownAtStart() async throws {
        let broker = try await MosquittoBroker()
        await broker.stop()
        let client = try TestClient(broker)
        try client.start()  // returns at once although nothing listens
        // A wait that gives up names why the last attempt failed: attempts were made, and failed.
        let error = await #expect(throws: MQTTError.self) {
            try await client.client.waitUntilConnected(timeout: .milliseconds(500))
        }
        #expect(error?.kind == .notConnected)
        #expect(error?.message.contains("Connection refused") == true, "\(String(describing: error))")
        #expect(!client.client.isConnected)
        #expect(client.inbox.events.isEmpty)

        try await broker.restart()
        let waiter = client.client
        try await withTimeout(.seconds(10), "connecting") { try await waiter.waitUntilConnected() }
        #expect(client.client.isConnected)
        #expect(client.inbox.events == [.connected(sessionPresent: false)])
    }

    @Test func willOfAKilledMosquittoSubReachesTheClient() async throws {
        let broker = try await MosquittoBroker()
        let observer = try TestClient(broker)
        try await observer.connect()
        try await observer.subscribe("will/#")

        let dying = try await broker.startSubscriber(
            topic: "dying/x", count: 1, timeout: .seconds(60),
            arguments: ["--will-topic", "will/sub", "--will-payload", "gone", "--will-qos", "1"]
        )
        dying.kill()
        let will = try await observer.inbox.waitForMessages(count: 1)
        #expect(will.map(\.topic) == ["will/sub"])
        #expect(will.map(\.text) == ["gone"])
    }

    @Test func brokerPublishesTheClientsWillWithItsPropertiesWhenTheConnectionIsTakenOver() async throws {
        let broker = try await MosquittoBroker()
        let observer = try TestClient(broker)
        try await observer.connect()
        try await observer.subscribe("will/#")

        let will = MQTTMessage(
            topic: "will/client", payload: Array("offline".utf8), qos: .atLeastOnce,
            properties: MQTTProperties(
                contentType: "text/plain", responseTopic: "will/replies", correlationData: [1, 2, 3],
                userProperties: [UserProperty("reason", "lost")]
            )
        )
        let client = try TestClient(broker) { configuration in
            configuration.will = will
            configuration.reconnectDelay = .seconds(30)  // stay away while the test looks
        }
        try await client.connect()

        // Another connection with the same client identifier makes the broker drop this one without a DISCONNECT
        // from the client: the will goes out.
        let usurper = try await broker.startSubscriber(
            topic: "takeover/x", count: 1, timeout: .seconds(60), clientID: client.clientID
        )
        defer { usurper.kill() }
        let received = try #require(try await observer.inbox.waitForMessages(count: 1).first)
        #expect(received.topic == will.topic)
        #expect(received.payload == will.payload)
        #expect(received.properties == will.properties)
        // mosquitto 2.0.11 just closes the old connection (no DISCONNECT 0x8E): libmosquitto reports it lost, and the
        // error says what to check rather than strerror's "Success".
        let lost = try await client.inbox.waitForEvents { $0.lostConnectionError != nil }
        let error = try #require(lost.first?.lostConnectionError)
        #expect(error.kind == .disconnected)
        #expect(error.message.contains("another client is probably connected with the same client id"), "\(error)")
    }

    @Test func disconnectDoesNotPublishTheWill() async throws {
        let broker = try await MosquittoBroker()
        let observer = try TestClient(broker)
        try await observer.connect()
        try await observer.subscribe("will/#")
        try await observer.subscribe("marker")

        let client = try TestClient(broker) { configuration in
            configuration.will = MQTTMessage(topic: "will/client", payload: Array("offline".utf8))
        }
        try await client.connect()
        let offset = broker.logLength
        await client.client.disconnect()
        #expect(client.inbox.events == [.connected(sessionPresent: false), .disconnected(nil)])
        #expect(!client.client.isConnected)
        try await broker.waitForLog("Client \(client.clientID) disconnected.", after: offset)

        try await broker.publish(topic: "marker", message: "after", qos: 1)
        _ = try await observer.inbox.waitForMessages(count: 1, on: "marker")
        #expect(observer.inbox.messages(on: "will/client").isEmpty)
        // It stays disconnected: closing joins its network thread, after which nothing can connect or report.
        await client.client.close()
        #expect(!client.client.isConnected)
        #expect(client.inbox.events == [.connected(sessionPresent: false), .disconnected(nil)])
    }

    @Test func wrongCredentialsAreRefusedAndRetried() async throws {
        let broker = try await MosquittoBroker(users: ["alice": "secret"])
        let intruder = try TestClient(broker) { configuration in
            configuration.username = "alice"
            configuration.password = "wrong"
        }
        try intruder.start()
        // Refused, and tried again (libmosquitto's own threaded loop would give up after the first refusal).
        let refusals = try await intruder.inbox.waitForEvents(count: 2) { $0.refusal != nil }
        for refusal in refusals.compactMap(\.refusal) {
            #expect(refusal.kind == .connectionRefused)
            // mosquitto 2.0 answers 0x87 (not authorized) or 0x86 (bad user name or password).
            #expect(refusal.code == 0x87 || refusal.code == 0x86)
            #expect(!refusal.message.isEmpty)
        }
        #expect(!intruder.client.isConnected)
        #expect(!intruder.inbox.events.contains { $0.isConnected })

        let anonymous = try TestClient(broker)
        try anonymous.start()
        try await anonymous.inbox.waitForEvents { $0.refusal != nil }

        let alice = try TestClient(broker) { configuration in
            configuration.username = "alice"
            configuration.password = "secret"
        }
        try await alice.connect()
        #expect(alice.client.isConnected)
    }

    @Test func persistentSessionKeepsQoS1MessagesPublishedWhileAway() async throws {
        let broker = try await MosquittoBroker(persistence: true)
        let clientID = "persistent-\(UUID().uuidString.prefix(8))"
        let configure: (inout MQTTConfiguration) -> Void = { configuration in
            configuration.cleanStart = false
            configuration.sessionExpiry = .seconds(300)
        }
        let first = try TestClient(broker, clientID: clientID, configure: configure)
        try await first.connect()
        try await first.subscribe("offline/#", qos: .atLeastOnce)
        #expect(first.inbox.events == [.connected(sessionPresent: false)])

        // An automatic reconnection (the broker restarts, keeping its sessions on disk). libmosquitto resends
        // the CONNECT properties given to the first connect: the session expiry must survive this reconnection,
        // or the broker would drop the session at the disconnect below.
        await broker.stop()
        try await broker.restart()
        try await first.inbox.waitForEvents { $0 == .connected(sessionPresent: true) }
        await first.client.disconnect()
        await first.client.close()

        for index in 1...5 {
            try await broker.publish(topic: "offline/\(index)", message: "while away \(index)", qos: 1)
        }

        let second = try TestClient(broker, clientID: clientID, configure: configure)
        try await second.connect()
        #expect(second.inbox.events.first == .connected(sessionPresent: true))
        let received = try await second.inbox.waitForMessages(count: 5)
        #expect(received.map(\.text) == (1...5).map { "while away \($0)" })
    }

    @Test func cleanStartForgetsTheSession() async throws {
        let broker = try await MosquittoBroker()
        let clientID = "clean-\(UUID().uuidString.prefix(8))"
        let first = try TestClient(broker, clientID: clientID) { configuration in
            configuration.cleanStart = false
            configuration.sessionExpiry = .seconds(300)
        }
        try await first.connect()
        try await first.subscribe("offline/#", qos: .atLeastOnce)
        await first.client.disconnect()
        try await broker.publish(topic: "offline/1", message: "while away", qos: 1)

        let second = try TestClient(broker, clientID: clientID)  // clean start
        try await second.connect()
        #expect(second.inbox.events == [.connected(sessionPresent: false)])
        // A resumed session would deliver what waited at the CONNACK, before a marker that comes through afterwards.
        try await second.subscribe("marker")
        try await broker.publish(topic: "marker", message: "after", qos: 1)
        _ = try await second.inbox.waitForMessages(count: 1, on: "marker")
        #expect(second.inbox.messages.map(\.topic) == ["marker"])
    }

    @Test func closeIsIdempotent() async throws {
        let broker = try await MosquittoBroker()
        let client = try TestClient(broker)
        try await client.connect()
        let offset = broker.logLength
        await client.client.close()
        await client.client.close()
        #expect(!client.client.isConnected)
        // close() said goodbye properly.
        try await broker.waitForLog("Client \(client.clientID) disconnected.", after: offset)

        let error = #expect(throws: MQTTError.self) {
            try client.client.publish(MQTTMessage(topic: "a/b", payload: [], qos: .atLeastOnce))
        }
        #expect(error?.code == 4)  // MOSQ_ERR_NO_CONN
        #expect(throws: MQTTError.self) { try client.client.subscribe("a/b") }
        #expect(throws: MQTTError.self) { try client.start() }
        await #expect(throws: MQTTError.self) { try await client.client.waitUntilConnected() }
        await client.client.disconnect()  // harmless
        await client.client.close()
    }

    @Test func closeWithoutStartAndWhileTheBrokerIsDown() async throws {
        let broker = try await MosquittoBroker()
        await broker.stop()
        let idle = try TestClient(broker)
        await idle.client.close()
        await idle.client.close()
        #expect(!idle.client.isConnected)

        // Between attempts it waits a minute: its first attempt is refused at once (nothing listens), then it waits.
        let retrying = try TestClient(broker) {
            $0.reconnectDelay = .seconds(60)
            $0.maximumReconnectDelay = .seconds(60)
        }
        try retrying.start()
        let waiter = retrying.client
        let wait = Task { try await waiter.waitUntilConnected() }
        try await Task.sleep(for: .milliseconds(200))
        // close() ends the wait between attempts rather than sitting it out: a bound well below the minute, and well
        // above what a loaded machine takes to end a thread and resume this task (13 s once under `make test-stress`,
        // against a bound of 10 s that a wait of at most 1 s, TestClient's, could not tell from sitting it out).
        let started = ContinuousClock.now
        await retrying.client.close()
        #expect(ContinuousClock.now - started < .seconds(40))
        // The waiting task learns that no connection will come.
        let error = await #expect(throws: MQTTError.self) { try await wait.value }
        #expect(error?.kind == .disconnected)
        #expect(retrying.inbox.events.isEmpty)
    }

    @Test func waitUntilConnectedCanBeCancelled() async throws {
        let broker = try await MosquittoBroker()
        await broker.stop()
        let client = try TestClient(broker)
        try client.start()
        let waiter = client.client
        let wait = Task { try await waiter.waitUntilConnected() }
        try await Task.sleep(for: .milliseconds(100))
        wait.cancel()
        let error = await #expect(throws: MQTTError.self) { try await wait.value }
        #expect(error?.kind == .disconnected)
    }

    /// A gate that holds the first attempts back (a cluster's slot whose lease is not fresh yet): the client connects
    /// once it lets one go, although libmosquitto never saw the broker's address before.
    @Test func aClientWhoseFirstAttemptsTheGateHeldBackConnectsLater() async throws {
        let broker = try await MosquittoBroker()
        let asked = Mutex(0)
        let client = try TestClient(broker) { configuration in
            configuration.connectionGate = {
                asked.withLock { count in
                    count += 1
                    return count <= 2 ? "not yet (\(count))" : nil
                }
            }
        }
        try await client.connect()
        #expect(asked.withLock { $0 } == 3)
        try await client.subscribe("gate/#")
        try await broker.publish(topic: "gate/open", message: "in", qos: 1)
        #expect(try await client.inbox.waitForMessages(count: 1).map(\.text) == ["in"])
    }

    @Test func anIdleClientPingsInTimeAndStaysConnected() async throws {
        let broker = try await MosquittoBroker(extraConfig: "log_type debug")
        var configuration = MQTTConfiguration(clientID: "idle-\(UUID().uuidString.prefix(8))")
        configuration.port = broker.port
        configuration.keepAlive = .seconds(5)
        let client = try MQTTClient(
            configuration: configuration, publishingSession: configuration.publishingSession, logger: testLogger)
        final class Recorder: MQTTClientHandler {
            let events = Mutex<[MQTTEvent]>([])
            func received(_ message: MQTTMessage) {}
            func event(_ event: MQTTEvent) { events.withLock { $0.append(event) } }
        }
        let recorder = Recorder()
        try await closing(client) {
            try client.start(recorder)
            try await client.waitUntilConnected(timeout: .seconds(10))
            // Nothing is sent or received: each session's only packets are its pings, one every keep-alive (5 s), sent
            // from a turn that comes when nothing else brings one (``MQTTConfiguration/idleTurn``). Two of each, within
            // the keep-alive and a half (7.5 s) after which the broker drops a silent client.
            let sessions = [configuration.clientID, configuration.publishingSession.clientID]
            try await waitUntil("two pings from each session", timeout: .seconds(30)) {
                let log = broker.log()
                return sessions.allSatisfy { log.components(separatedBy: "Received PINGREQ from \($0)\n").count - 1 >= 2 }
            }
            #expect(!broker.log().contains("exceeded timeout"), "\(broker.log())")
            #expect(recorder.events.withLock { $0 } == [.connected(sessionPresent: false)])
            #expect(client.isConnected)
        }
    }

    @Test func closeFromTheMessageHandlerDoesNotDeadlock() async throws {
        let broker = try await MosquittoBroker()
        let box = ClientBox()
        let closed = Inbox()
        var configuration = MQTTConfiguration(clientID: "self-closing-\(UUID().uuidString.prefix(8))")
        configuration.port = broker.port
        let client = try MQTTClient(configuration: configuration, logger: testLogger)
        box.client = client
        try client.start { message in
            box.client?.syncClose()  // on the network thread
            closed.receive(message)
        }
        // closing: should the test fail before the handler closes it (close is idempotent).
        try await closing(client) {
            try await withTimeout(.seconds(10), "connecting") { try await client.waitUntilConnected() }
            let offset = broker.logLength
            try client.subscribe("close/me")
            try await broker.waitForLog("\(configuration.clientID) 1 close/me", after: offset)
            try await broker.publish(topic: "close/me", message: "bye", qos: 1)
            _ = try await closed.waitForMessages(count: 1)
            try await broker.waitForLog("Client \(configuration.clientID) disconnected.", after: offset)
            #expect(!client.isConnected)
            #expect(throws: MQTTError.self) { try client.publish(MQTTMessage(topic: "a", payload: [])) }
        }
        box.client = nil
    }
}

/// Lets a handler reach the client it belongs to.
final class ClientBox: Sendable {
    private let stored = Mutex<MQTTClient?>(nil)

    var client: MQTTClient? {
        get { stored.withLock { $0 } }
        set { stored.withLock { $0 = newValue } }
    }
}
