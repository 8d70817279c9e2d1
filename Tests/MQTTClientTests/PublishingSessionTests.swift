import Foundation
import MQTTClient
import Synchronization
import Testing
import TestSupport

/// A client with a publishing session: it reads only while what it publishes can leave, against real brokers.
@Suite(.timeLimit(.minutes(2)))
struct PublishingSessionTests {
    /// Publishes, for each message received on `in/<n>`, a retained `out/<n>`; records what it received, what the
    /// client refused and the events.
    final class Echo: MQTTClientHandler {
        struct Record {
            var received: [String] = []
            var refused: [MQTTError] = []
            var events: [MQTTEvent] = []
        }

        let client: MQTTClient
        let record = Mutex(Record())

        init(_ client: MQTTClient) {
            self.client = client
        }

        func received(_ message: MQTTMessage) {
            let echo = MQTTMessage(
                topic: "out/" + message.topic.dropFirst("in/".count), payload: message.payload, retain: true)
            do {
                try client.publish(echo)
                record.withLock { $0.received.append(message.topic) }
            } catch {
                record.withLock {
                    $0.received.append(message.topic)
                    $0.refused.append(error)
                }
            }
        }

        func event(_ event: MQTTEvent) {
            record.withLock { $0.events.append(event) }
        }

        var received: [String] { record.withLock { $0.received } }

        func waitUntilReceived(_ count: Int, timeout: Duration = .seconds(20)) async throws {
            let deadline = ContinuousClock.now + timeout
            while received.count < count {
                guard ContinuousClock.now < deadline else {
                    throw TimeoutError(description: "\(count) messages not received; got \(received.count)")
                }
                try await Task.sleep(for: .milliseconds(10))
            }
        }
    }

    /// An echo client receiving on one broker and publishing to another, which is down at first: what the handler
    /// publishes waits in the client. It has subscribed, and 20 messages are on their way to it.
    struct Setup {
        let inbound: MosquittoBroker
        let outbound: MosquittoBroker
        let clientID: String
        let client: MQTTClient
        let echo: Echo
        let sender: TestClient

        init(queueBound: Int, configure: (inout MQTTConfiguration) -> Void = { _ in }) async throws {
            inbound = try await MosquittoBroker()
            outbound = try await MosquittoBroker()
            await outbound.stop()
            clientID = "echo-\(UUID().uuidString.prefix(8))"
            var receiving = MQTTConfiguration(clientID: clientID)
            receiving.host = inbound.host
            receiving.port = inbound.port
            configure(&receiving)
            var publishing = receiving.publishingSession
            publishing.port = outbound.port
            publishing.maximumPendingMessages = queueBound
            client = try MQTTClient(configuration: receiving, publishingSession: publishing, logger: testLogger)
            echo = Echo(client)
            try client.subscribe("in/#", qos: .atLeastOnce)
            try client.start(echo)
            try await inbound.waitForLog("\(clientID) 1 in/#", timeout: .seconds(10))
            sender = try TestClient(inbound)
            try await sender.connect()
        }

        func sendTwenty() throws {
            for index in 0..<20 {
                try sender.client.publish(MQTTMessage(topic: "in/\(index)", payload: Array("\(index)".utf8)))
            }
        }
    }

    @Test func readingWaitsWhileWhatItPublishesCannotLeaveAndNothingIsRefused() async throws {
        // Reading pauses once more than 4 wait, and resumes once at most 2 do.
        let setup = try await Setup(queueBound: 8) { receiving in
            receiving.reconnectDelay = .milliseconds(100)
            receiving.maximumReconnectDelay = .milliseconds(200)
        }
        let (client, echo) = (setup.client, setup.echo)
        try setup.sendTwenty()
        try await echo.waitUntilReceived(5)
        // It stops there: the five it published wait, and the rest waits at the broker.
        try await Task.sleep(for: .seconds(1))
        #expect(echo.received.count == 5)
        #expect(client.pendingMessages == 5)
        // One connection as far as the handler knows: not up while the publishing session is not.
        #expect(echo.record.withLock { $0.events }.isEmpty)

        try await setup.outbound.restart()
        try await echo.waitUntilReceived(20)
        #expect(echo.received == (0..<20).map { "in/\($0)" })
        #expect(echo.record.withLock { $0.refused }.isEmpty)
        #expect(echo.record.withLock { $0.events } == [.connected(sessionPresent: false)])
        let published = try await setup.outbound.subscribe(topic: "out/#", count: 20, timeout: .seconds(10))
        #expect(Set(published) == Set((0..<20).map { "out/\($0) \($0)" }))

        await client.close()
        #expect(echo.record.withLock { $0.events } == [.connected(sessionPresent: false), .disconnected(nil)])
    }

    @Test func aPausedSessionReadsAPacketEveryHalfKeepAliveAndStaysConnected() async throws {
        let setup = try await Setup(queueBound: 16) { $0.keepAlive = .seconds(5) }
        let (inbound, echo) = (setup.inbound, setup.echo)
        let offset = inbound.logLength
        try setup.sendTwenty()
        try await echo.waitUntilReceived(9)
        // Paused for longer than a keep-alive and a half, after which the broker would drop a silent client: a
        // packet every 2.5 s keeps it.
        try await Task.sleep(for: .seconds(9))
        #expect((11...13).contains(echo.received.count), "\(echo.received.count)")
        #expect(echo.record.withLock { $0.refused }.isEmpty)
        #expect(
            !inbound.log().dropFirst(offset).contains("Client \(setup.clientID) "), "\(inbound.log().dropFirst(offset))")

        await setup.client.close()
    }

    @Test func thePublishingConnectionComesBackAloneAndTheReceivingOneStays() async throws {
        let broker = try await MosquittoBroker()
        let clientID = "alone-\(UUID().uuidString.prefix(8))"
        var receiving = MQTTConfiguration(clientID: clientID)
        receiving.host = broker.host
        receiving.port = broker.port
        receiving.reconnectDelay = .milliseconds(100)
        receiving.maximumReconnectDelay = .milliseconds(200)
        let client = try MQTTClient(configuration: receiving, publishingSession: receiving.publishingSession, logger: testLogger)
        let echo = Echo(client)
        try client.subscribe("in/#", qos: .atLeastOnce)
        try client.start(echo)
        try await client.waitUntilConnected()
        let observer = try TestClient(broker)
        try await observer.connect()
        try await observer.subscribe("out/#")
        let offset = broker.logLength

        // Another client takes the publishing connection's id: the broker drops it, and it comes back by itself.
        let usurper = try await broker.startSubscriber(
            topic: "takeover/x", count: 1, timeout: .seconds(60), clientID: "\(clientID)-publishing")
        usurper.kill()
        let deadline = ContinuousClock.now + .seconds(10)
        while echo.record.withLock({ $0.events.filter(\.isConnected).count }) < 2 {
            guard ContinuousClock.now < deadline else {
                throw TimeoutError(description: "not connected again: \(echo.record.withLock { $0.events })")
            }
            try await Task.sleep(for: .milliseconds(10))
        }
        let events = echo.record.withLock { $0.events }
        #expect(events.first == .connected(sessionPresent: false))
        #expect(events.contains { $0.lostConnectionError != nil }, "\(events)")
        #expect(events.last == .connected(sessionPresent: false))

        // It publishes again, and the receiving connection never went.
        let sender = try TestClient(broker)
        try await sender.connect()
        for index in 0..<5 {
            try sender.client.publish(MQTTMessage(topic: "in/\(index)", payload: Array("\(index)".utf8)))
        }
        let echoed = try await observer.inbox.waitForMessages(count: 5, on: nil)
        #expect(Set(echoed.map(\.topic)) == Set((0..<5).map { "out/\($0)" }))
        #expect(!broker.log().dropFirst(offset).contains("Client \(clientID) "), "\(broker.log().dropFirst(offset))")
        await client.close()
    }
}
