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

        // More than the 1,024 beyond which the emptied queue's storage is released: delivery goes on after that.
        let bound = 1_500
        let publisher = try TestClient(broker) { $0.maximumPendingMessages = bound }
        try await publisher.connect()

        await broker.stop()
        try await publisher.inbox.waitForEvents { $0.lostConnectionError != nil }
        #expect(!publisher.client.isConnected)
        func payload(_ index: Int) -> [UInt8] { [UInt8(index >> 8), UInt8(index & 0xFF)] }
        for index in 0..<bound {
            try publisher.client.publish(MQTTMessage(topic: "bound/data", payload: payload(index), qos: .atLeastOnce))
        }
        #expect(publisher.client.pendingMessages == bound)
        let error = #expect(throws: MQTTError.self) {
            try publisher.client.publish(MQTTMessage(topic: "bound/data", payload: payload(bound), qos: .atLeastOnce))
        }
        #expect(error?.kind == .queueFull)
        #expect(error?.message.contains("1500 messages already wait for the next connection") == true)

        try await broker.restart()
        let delivered = try await subscriber.inbox.waitForMessages(count: bound, on: "bound/data")
        #expect(delivered.map(\.payload) == (0..<bound).map(payload))
        #expect(publisher.client.pendingMessages == 0)
        try publisher.client.publish(MQTTMessage(topic: "bound/data", payload: payload(bound), qos: .atLeastOnce))
        #expect(try await subscriber.inbox.waitForMessages(count: bound + 1, on: "bound/data").last?.payload == payload(bound))
    }
}
