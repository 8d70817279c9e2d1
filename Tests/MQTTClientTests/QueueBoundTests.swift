import MQTTClient
import Testing
import TestSupport

/// While disconnected, what libmosquitto holds for the next connection is bounded and counted.
@Suite struct QueueBoundTests {
    @Test func publishingWhileDisconnectedIsBoundedAndDeliveredOnReconnect() async throws {
        let broker = try await MosquittoBroker(persistence: true)
        // A persistent subscriber, so that the broker keeps what it misses while it is down too.
        let subscriber = try TestClient(broker, clientID: "bound-subscriber") {
            $0.cleanStart = false
            $0.sessionExpiry = .seconds(600)
        }
        try await subscriber.connect()
        try await subscriber.subscribe("bound/data")

        let publisher = try TestClient(broker) { $0.maximumPendingMessages = 5 }
        try await publisher.connect()

        await broker.stop()
        try await publisher.inbox.waitForEvents { $0.lostConnectionError != nil }
        #expect(!publisher.client.isConnected)
        for index in 0..<5 {
            try publisher.client.publish(MQTTMessage(topic: "bound/data", payload: [UInt8(index)], qos: .atLeastOnce))
        }
        #expect(publisher.client.pendingMessages == 5)
        let error = #expect(throws: MQTTError.self) {
            try publisher.client.publish(MQTTMessage(topic: "bound/data", payload: [5], qos: .atLeastOnce))
        }
        #expect(error?.kind == .queueFull)
        #expect(error?.message.contains("5 messages already wait for the next connection") == true)

        try await broker.restart()
        let delivered = try await subscriber.inbox.waitForMessages(count: 5, on: "bound/data")
        #expect(delivered.map(\.payload) == [[0], [1], [2], [3], [4]])
        #expect(publisher.client.pendingMessages == 0)
        try publisher.client.publish(MQTTMessage(topic: "bound/data", payload: [6], qos: .atLeastOnce))
        _ = try await subscriber.inbox.waitForMessages(count: 6, on: "bound/data")
    }
}
