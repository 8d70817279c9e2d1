import Foundation
import Logging
@testable import MQTTClient
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
            /// When each was received.
            var receivedAt: [ContinuousClock.Instant] = []
            var refused: [MQTTError] = []
            var events: [MQTTEvent] = []
        }

        /// Weak: the client holds its handler until it is closed.
        weak let client: MQTTClient?
        let record = Mutex(Record())

        init(_ client: MQTTClient) {
            self.client = client
        }

        func received(_ message: MQTTMessage) {
            let echo = MQTTMessage(
                topic: "out/" + message.topic.dropFirst("in/".count), payload: message.payload, retain: true)
            let refusal: MQTTError?
            do {
                try client?.publish(echo)
                refusal = nil
            } catch {
                refusal = error
            }
            record.withLock {
                $0.received.append(message.topic)
                $0.receivedAt.append(.now)
                if let refusal { $0.refused.append(refusal) }
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
    /// publishes waits in the client. It has subscribed, and 20 messages are on their way to it. Its client closes
    /// when it goes away, also when a test fails midway.
    final class Setup: Sendable {
        let inbound: MosquittoBroker
        let outbound: MosquittoBroker
        let clientID: String
        let client: MQTTClient
        let echo: Echo
        let sender: TestClient

        init(
            queueBound: Int, logger: Logger = testLogger, configure: (inout MQTTConfiguration) -> Void = { _ in }
        ) async throws {
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
            let client = try MQTTClient(configuration: receiving, publishingSession: publishing, logger: logger)
            self.client = client
            let echo = Echo(client)
            self.echo = echo
            do {
                try client.subscribe("in/#", qos: .atLeastOnce)
                try client.start(echo)
                try await inbound.waitForLog("\(clientID) 1 in/#", timeout: .seconds(10))
                sender = try TestClient(inbound)
                try await sender.connect()
            } catch {
                await client.close()
                throw error
            }
        }

        deinit {
            client.syncClose()
        }

        func sendTwenty() throws {
            for index in 0..<20 {
                try sender.client.publish(MQTTMessage(topic: "in/\(index)", payload: Array("\(index)".utf8)))
            }
        }
    }

    @Test func readingWaitsWhileWhatItPublishesCannotLeaveAndNothingIsRefused() async throws {
        // Reading pauses once more than 4 wait, and resumes once at most 2 do.
        let logs = LogRecorder()
        let setup = try await Setup(queueBound: 8, logger: Logger(label: "echo") { _ in logs }) { receiving in
            receiving.reconnectDelay = .milliseconds(100)
            receiving.maximumReconnectDelay = .milliseconds(200)
        }
        let (client, echo) = (setup.client, setup.echo)
        try setup.sendTwenty()
        // It stops there: the client says so before it would read the sixth, and reads nothing more for half a
        // keep-alive (15 s). The five it published wait, and the rest waits at the broker.
        try await waitUntil("reading paused") { logs.all.contains { $0.contains("MQTT reading paused") } }
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
        // Paused (9 wait, more than half of 16), it reads one packet every half keep-alive (2.5 s), never sooner; the
        // third of those comes after a keep-alive and a half (7.5 s), when the broker would have dropped a silent
        // client: it arrives on the same connection, which therefore stayed up.
        try await echo.waitUntilReceived(12, timeout: .seconds(60))
        let times = echo.record.withLock { $0.receivedAt }
        for index in 9..<12 {
            #expect(times[index] - times[index - 1] >= .milliseconds(2000), "read \(index) came too soon")
        }
        #expect(times[11] - times[8] >= .milliseconds(7500))
        #expect(echo.record.withLock { $0.refused }.isEmpty)
        #expect(echo.record.withLock { $0.events }.allSatisfy { $0.lostConnectionError == nil })
        #expect(
            !inbound.log().dropFirst(offset).contains("Client \(setup.clientID) "), "\(inbound.log().dropFirst(offset))")

        await setup.client.close()
    }

    /// An echo client with both sessions on one broker (reconnecting within 200 ms), connected, and an observer
    /// subscribed to `out/#`; closes the client after `body`.
    func withEchoOnOneBroker(
        _ name: String,
        _ body: (
            _ broker: MosquittoBroker, _ clientID: String, _ client: MQTTClient, _ echo: Echo, _ observer: TestClient
        ) async throws -> Void
    ) async throws {
        let broker = try await MosquittoBroker()
        let clientID = "\(name)-\(UUID().uuidString.prefix(8))"
        var receiving = MQTTConfiguration(clientID: clientID)
        receiving.host = broker.host
        receiving.port = broker.port
        receiving.reconnectDelay = .milliseconds(100)
        receiving.maximumReconnectDelay = .milliseconds(200)
        // Idle turns ten minutes apart: what these tests wait for must come of the events themselves (a connection
        // the broker closed wakes the loop), never of an idle turn.
        receiving.idleTurn = .seconds(600)
        let client = try MQTTClient(
            configuration: receiving, publishingSession: receiving.publishingSession, logger: testLogger)
        let echo = Echo(client)
        try await closing(client) {
            try client.subscribe("in/#", qos: .atLeastOnce)
            try client.start(echo)
            try await client.waitUntilConnected(timeout: .seconds(10))
            let observer = try TestClient(broker)
            try await observer.connect()
            try await observer.subscribe("out/#")
            try await body(broker, clientID, client, echo, observer)
        }
    }

    /// Publishes five messages, `out/<n>/0` to `out/<n>/4`, for each message received on `in/<n>`.
    final class Fanout: MQTTClientHandler {
        weak let client: MQTTClient?
        let handled = Atomic(0)
        let refused = Mutex<[MQTTError]>([])

        init(_ client: MQTTClient) {
            self.client = client
        }

        func received(_ message: MQTTMessage) {
            for part in 0..<5 {
                do {
                    try client?.publish(
                        MQTTMessage(topic: "out/\(message.topic.dropFirst("in/".count))/\(part)", payload: message.payload))
                } catch {
                    refused.withLock { $0.append(error) }
                }
            }
            handled.add(1, ordering: .relaxed)
        }
    }

    /// A client with a publishing session, each session alone on a broker of its own (every segment sent to a
    /// broker's port is that session's, but for a sender this process connects), handling with ``Fanout``, no PINGREQ
    /// while it runs; `configure` changes the receiving session's configuration first.
    func withFanoutOnTwoBrokers(
        _ name: String, configure: (inout MQTTConfiguration) -> Void = { _ in },
        _ body: (_ inbound: MosquittoBroker, _ outbound: MosquittoBroker, _ fanout: Fanout) async throws -> Void
    ) async throws {
        let inbound = try await MosquittoBroker()
        let outbound = try await MosquittoBroker()
        var receiving = MQTTConfiguration(clientID: "\(name)-\(UUID().uuidString.prefix(8))")
        receiving.host = inbound.host
        receiving.port = inbound.port
        receiving.keepAlive = .seconds(600)
        configure(&receiving)
        var publishing = receiving.publishingSession
        publishing.port = outbound.port
        let client = try MQTTClient(configuration: receiving, publishingSession: publishing, logger: testLogger)
        let fanout = Fanout(client)
        try await closing(client) {
            try client.subscribe("in/#", qos: .atLeastOnce)
            try client.start(fanout)
            try await inbound.waitForLog("\(receiving.clientID) 1 in/#", timeout: .seconds(10))
            try await client.waitUntilConnected(timeout: .seconds(10))
            try await body(inbound, outbound, fanout)
            #expect(fanout.refused.withLock { $0 }.isEmpty)
        }
    }

    /// libmosquitto writes each packet with a write(2) of its own, and with TCP_NODELAY each would leave in a segment
    /// of its own: what one packet made the handler publish is written corked, and leaves in one segment.
    @Test func whatOnePacketMakesTheHandlerPublishLeavesInOneSegment() async throws {
        try await withFanoutOnTwoBrokers("fanout") { inbound, outbound, fanout in
            let sender = try TestClient(inbound)
            try await sender.connect()
            for index in 0..<3 {
                let before = try dataSegmentsSent(toPort: outbound.port)
                try sender.client.publish(MQTTMessage(topic: "in/\(index)", payload: Array("\(index)".utf8)))
                try await waitUntil("message \(index) handled and its five acknowledged") {
                    fanout.handled.load(ordering: .relaxed) == index + 1 && fanout.client?.messagesInFlight == 0
                }
                let sent = try dataSegmentsSent(toPort: outbound.port) - before
                #expect(sent == 1, "message \(index): \(sent) segments for its five publications")
            }
        }
    }

    /// A receiving session with a publishing session lets its acknowledgements wait (``ClientCore/writesWait()``):
    /// those of messages that came one at a time are not written as each is handled, but together once
    /// ``ClientCore/acknowledgementsPerWrite`` messages were, in one segment. Each message comes from a mosquitto_pub
    /// of its own, so that the receiving session's connection is this process's only one to its broker.
    @Test func theReceivingSessionsAcknowledgementsWaitAndLeaveTogether() async throws {
        try await withFanoutOnTwoBrokers("acks", configure: { $0.acknowledgementDelay = .seconds(600) }) {
            inbound, _, fanout in
            let before = try dataSegmentsSent(toPort: inbound.port)
            let count = ClientCore.acknowledgementsPerWrite
            for index in 0..<count {
                if index == count - 1 {
                    #expect(try dataSegmentsSent(toPort: inbound.port) == before, "\(index) acknowledgements waited")
                }
                try await inbound.publish(topic: "in/\(index)", message: "\(index)", qos: 1)
                try await waitUntil("message \(index) handled") { fanout.handled.load(ordering: .relaxed) == index + 1 }
            }
            try await waitUntil("the acknowledgements written") {
                (try? dataSegmentsSent(toPort: inbound.port)) != before
            }
            let sent = try dataSegmentsSent(toPort: inbound.port) - before
            #expect(sent == 1, "\(sent) segments for \(count) acknowledgements")
        }
    }

    /// What waits is written once ``MQTTConfiguration/acknowledgementDelay`` has passed, with nothing else arriving:
    /// the waiting session's turn comes of its due time, not of a packet.
    @Test func aReceivingSessionsAcknowledgementIsWrittenOnceItsDelayPassed() async throws {
        try await withFanoutOnTwoBrokers("ack", configure: {
            $0.acknowledgementDelay = .milliseconds(300)
            // No idle turn would write it in time instead.
            $0.idleTurn = .seconds(600)
        }) { inbound, _, fanout in
            let before = try dataSegmentsSent(toPort: inbound.port)
            try await inbound.publish(topic: "in/0", message: "0", qos: 1)
            try await waitUntil("the message handled") { fanout.handled.load(ordering: .relaxed) == 1 }
            try await waitUntil("its acknowledgement written", timeout: .seconds(10)) {
                (try? dataSegmentsSent(toPort: inbound.port)) == before + 1
            }
        }
    }

    /// Another client takes the publishing connection's id: the broker drops it, and it comes back by itself.
    /// Until the usurper is killed, the two may take the id from each other more than once (mosquitto_sub reconnects
    /// too, and under load the subscription it waits for comes late): the session is back once its last event is a
    /// connection, not at its second one.
    func takeThePublishingConnection(_ clientID: String, on broker: MosquittoBroker, from echo: Echo) async throws {
        let usurper = try await broker.startSubscriber(
            topic: "takeover/x", count: 1, timeout: .seconds(60), clientID: "\(clientID)-publishing")
        usurper.kill()
        try await waitUntil("connected again", timeout: .seconds(10)) {
            echo.record.withLock { $0.events.filter(\.isConnected).count >= 2 && $0.events.last?.isConnected == true }
        }
    }

    /// A publishing session's acknowledgements wait for the next turn (nothing wakes the loop for them alone): with
    /// nothing else arriving, they are still read, and a connection the broker then takes away ends with nothing
    /// sent again on the next one.
    @Test func acknowledgementsAreReadWhileNothingElseArrivesAndNothingIsSentTwice() async throws {
        try await withEchoOnOneBroker("acks") { broker, clientID, client, echo, observer in
            let sender = try TestClient(broker)
            try await sender.connect()
            // Five echoes, fewer than half the window (100): their acknowledgements may wait, and nothing follows.
            for index in 0..<5 {
                try sender.client.publish(MQTTMessage(topic: "in/\(index)", payload: Array("\(index)".utf8)))
            }
            _ = try await observer.inbox.waitForMessages(count: 5, on: nil)
            try await waitUntil("the five echoes acknowledged") { client.messagesInFlight == 0 }

            try await takeThePublishingConnection(clientID, on: broker, from: echo)
            try sender.client.publish(MQTTMessage(topic: "in/5", payload: Array("5".utf8)))
            // What a new connection sends again comes before the sixth echo: once it is here, look.
            _ = try await observer.inbox.waitForMessages(count: 1, on: "out/5")
            let echoed = observer.inbox.messages.map(\.topic)
            #expect(echoed == (0..<6).map { "out/\($0)" }, "\(echoed)")
        }
    }

    /// With its send window full and a message waiting for room in it, a publishing session's acknowledgements still
    /// wait for a turn rather than wake the loop one by one: the turn due a fifth of ``acknowledgementDelay`` after
    /// the last reads them, and writes what waited, in order. (Woken by each, a loop that fell behind fell further:
    /// docs/performance-history.md, "Acknowledgements in the next turn".)
    @Test func acknowledgementsWaitForATurnWithTheWindowFull() async throws {
        let delay = Duration.seconds(5)
        let sooner = delay / PublishingLink.delayDivisorWhileMessagesWait
        try await withFanoutOnTwoBrokers("full", configure: {
            $0.maximumInflightMessages = 4
            $0.acknowledgementDelay = delay
            $0.idleTurn = .seconds(600)
        }) { inbound, outbound, fanout in
            let observer = try TestClient(outbound)
            try await observer.connect()
            try await observer.subscribe("out/#")
            // One message, five publications: four fill the window and are acknowledged at once; the fifth waits for
            // the turn that reads that, which nothing else brings on (the receiving session's own acknowledgement
            // waits the whole delay).
            let published = ContinuousClock.now
            try await inbound.publish(topic: "in/0", message: "0", qos: 1)
            _ = try await observer.inbox.waitForMessages(count: 1, on: "out/0/4", timeout: delay - .seconds(1))
            let waited = ContinuousClock.now - published
            #expect(waited >= sooner, "the fifth publication left \(waited) after the message, before its turn was due")
            let first = observer.inbox.messages.map(\.topic)
            #expect(first == (0..<5).map { "out/0/\($0)" }, "\(first)")
        }
    }

    @Test func thePublishingConnectionComesBackAloneAndTheReceivingOneStays() async throws {
        try await withEchoOnOneBroker("alone") { broker, clientID, _, echo, observer in
            let offset = broker.logLength
            try await takeThePublishingConnection(clientID, on: broker, from: echo)
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
        }
    }
}
