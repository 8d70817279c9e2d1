import Foundation
import MQTTClient
import Synchronization
import Testing
import TestSupport

#if canImport(Glibc)
import Glibc
#endif

/// Many clients on a few shared network loops (``MQTTLoopGroup``), as a cluster member's slots run, against a real
/// mosquitto: they share the loops' threads, each keeps its own sessions and order, one that stops or closes (even from
/// its own handler) leaves the others running, and a loop whose clients all left starts again for the next.
@Suite(.timeLimit(.minutes(2)))
struct LoopGroupTests {
    /// The threads handlers started on, and their names.
    final class ThreadSet: Sendable {
        let ids = Mutex<Set<UInt>>([])
        let names = Mutex<Set<String>>([])

        /// Records the calling thread.
        func record() {
            ids.withLock { _ = $0.insert(UInt(pthread_self())) }
            names.withLock { _ = $0.insert(currentThreadName()) }
        }
    }

    /// Echoes `loop/<n>/in` to `loop/<n>/out` through a publishing session, recording on which thread it ran; closes its
    /// own client (on its loop's thread) when it receives "close".
    final class Echo: MQTTClientHandler {
        let number: Int
        let box = ClientBox()
        let threads: ThreadSet
        let received = Mutex(0)

        init(_ number: Int, threads: ThreadSet) {
            self.number = number
            self.threads = threads
        }

        func started() {
            threads.record()
        }

        func received(_ message: MQTTMessage) {
            received.withLock { $0 += 1 }
            if message.payload == Array("close".utf8) {
                box.client?.syncClose()
                return
            }
            _ = try? box.client?.publish(
                MQTTMessage(topic: "loop/\(number)/out", payload: message.payload, qos: .atLeastOnce))
        }
    }

    /// `count` echo clients on `group`, each with a publishing session, connected and subscribed.
    static func startEchoes(
        _ count: Int, from first: Int = 0, on group: MQTTLoopGroup, broker: MosquittoBroker, threads: ThreadSet
    ) async throws -> [(client: MQTTClient, echo: Echo)] {
        var started: [(MQTTClient, Echo)] = []
        let offset = broker.logLength
        let run = UUID().uuidString.prefix(8)
        for number in first..<(first + count) {
            var configuration = MQTTConfiguration(clientID: "echo-\(number)-\(run)")
            configuration.port = broker.port
            var publishing = configuration.publishingSession
            publishing.port = broker.port
            let client = try MQTTClient(
                configuration: configuration, publishingSession: publishing, loops: group, logger: testLogger)
            let echo = Echo(number, threads: threads)
            echo.box.client = client
            try client.subscribe("loop/\(number)/in")
            try client.start(echo)
            started.append((client, echo))
        }
        for (number, (client, _)) in zip(first..., started) {
            try await withTimeout(.seconds(20), "echo \(number) connecting") { try await client.waitUntilConnected() }
            try await broker.waitForLog("echo-\(number)-\(run) 1 loop/\(number)/in", after: offset, timeout: .seconds(20))
        }
        return started
    }

    @Test func manyClientsShareTheGroupsThreadsAndLeaveOneByOne() async throws {
        let broker = try await MosquittoBroker()
        let group = try MQTTLoopGroup(count: 2)
        let threads = ThreadSet()
        let echoes = try await Self.startEchoes(40, on: group, broker: broker, threads: threads)
        let watcher = try TestClient(broker)
        try await watcher.connect()
        try await watcher.subscribe("loop/+/out")

        // Forty clients, two threads, named for the group's loops (what `top -H` and a profiler show).
        #expect(threads.ids.withLock { $0.count } == 2)
        #expect(threads.names.withLock { $0 } == ["mqtt-loop-1", "mqtt-loop-2"])
        // Each message is echoed by its own client, and only by it; published from this task (another thread than
        // the loops': each publish wakes its client's loop).
        for (number, (client, _)) in echoes.enumerated() {
            try client.publish(MQTTMessage(topic: "loop/\(number)/in", payload: Array("first".utf8), qos: .atLeastOnce))
        }
        let firsts = try await watcher.inbox.waitForMessages(count: 40)
        #expect(Set(firsts.map(\.topic)) == Set((0..<40).map { "loop/\($0)/out" }))

        // Half of them leave: ten closed from this task, ten from their own handlers (on the loop's thread).
        for (client, _) in echoes[0..<10] { await client.close() }
        for number in 10..<20 { try await broker.publish(topic: "loop/\(number)/in", message: "close", qos: 1) }
        for (_, echo) in echoes[10..<20] {
            try await waitUntil("echo \(echo.number) closed itself") { echo.received.withLock { $0 } == 2 }
        }
        // The others go on, a message each, in order.
        for round in 0..<5 {
            for number in 20..<40 { try await broker.publish(topic: "loop/\(number)/in", message: "\(round)", qos: 1) }
        }
        let all = try await watcher.inbox.waitForMessages(count: 40 + 20 * 5)
        for number in 20..<40 {
            #expect(all.filter { $0.topic == "loop/\(number)/out" }.map(\.text) == ["first", "0", "1", "2", "3", "4"])
        }
        #expect(all.count == 40 + 20 * 5)
        // The ones that left echo nothing more.
        for number in 0..<20 { try await broker.publish(topic: "loop/\(number)/in", message: "late", qos: 1) }
        try await broker.publish(topic: "loop/20/in", message: "marker", qos: 1)
        let last = try await watcher.inbox.waitForMessages(count: 40 + 20 * 5 + 1)
        #expect(last.last?.topic == "loop/20/out")
        #expect(!last.contains { $0.text == "late" })

        for (client, _) in echoes { await client.close() }

        // Every client left: the loops' threads ended. The next clients start them again.
        let again = try await Self.startEchoes(4, from: 100, on: group, broker: broker, threads: threads)
        for (index, (client, _)) in again.enumerated() {
            try client.publish(
                MQTTMessage(topic: "loop/\(100 + index)/in", payload: Array("again".utf8), qos: .atLeastOnce))
        }
        let echoedAgain = try await watcher.inbox.waitForMessages(count: 40 + 20 * 5 + 1 + 4).filter { $0.text == "again" }
        #expect(Set(echoedAgain.map(\.topic)) == Set((100..<104).map { "loop/\($0)/out" }))
        for (client, _) in again { await client.close() }
        await watcher.client.close()
    }

    /// A client made without a group runs on a thread of its own, named for its loop: not its creator's name (a
    /// cooperative-pool or dispatch thread's, "…root.default-qos", which a bridge's busiest thread showed before).
    @Test func aClientAlonesThreadIsNamedForItsLoop() async throws {
        let broker = try await MosquittoBroker()
        let threads = ThreadSet()
        let client = try TestClient(broker)
        try client.client.start(onEvent: { if case .connected = $0 { threads.record() } }, onMessage: { _ in })
        try await withTimeout(.seconds(10), "connecting") { try await client.client.waitUntilConnected() }
        try await waitUntil("the connected event") { !threads.names.withLock { $0.isEmpty } }
        #expect(threads.names.withLock { $0 } == ["mqtt-loop"])
        await client.client.close()
    }

    @Test func aGroupNeedsALoop() {
        #expect(throws: MQTTError.self) { try MQTTLoopGroup(count: 0) }
    }

    func waitUntil(_ what: String, timeout: Duration = .seconds(10), _ condition: () -> Bool) async throws {
        let deadline = ContinuousClock.now + timeout
        while !condition() {
            guard ContinuousClock.now < deadline else { throw TimeoutError(description: "\(what): not within \(timeout)") }
            try await Task.sleep(for: .milliseconds(10))
        }
    }
}

/// The calling thread's name, as the system shows it (/proc/thread-self/comm).
private func currentThreadName() -> String {
    let name = (try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8)) ?? ""
    return name.trimmingCharacters(in: .newlines)
}
