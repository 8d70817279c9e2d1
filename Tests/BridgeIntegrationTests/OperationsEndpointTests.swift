import AccessoryModel
@testable import AccessoryWire
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
import TestSupport

/// The real `accessory-bridge` process's `/metrics` and `/health/*`, scraped over real HTTP while a hub and a playing
/// device use it through a real mosquitto.
@Suite struct OperationsEndpointTests {
    struct HTTPResponse {
        var status: Int
        var body: String
    }

    static func get(_ port: Int, _ path: String) async throws -> HTTPResponse {
        let url = try #require(URL(string: "http://127.0.0.1:\(port)\(path)"))
        let (data, response) = try await URLSession.shared.data(from: url)
        return HTTPResponse(status: (response as? HTTPURLResponse)?.statusCode ?? 0, body: String(decoding: data, as: UTF8.self))
    }

    /// Polls `path` until `condition` holds (the process starts, gauges refresh every statistics interval).
    static func waitFor(
        _ port: Int, _ path: String, timeout: Duration = .seconds(30), _ condition: (HTTPResponse) -> Bool
    ) async throws -> HTTPResponse {
        let deadline = ContinuousClock.now + timeout
        var last = HTTPResponse(status: 0, body: "")
        // Asked once more after the deadline, as every wait here: a task that could not run for a while is no answer.
        while true {
            if let response = try? await get(port, path) {
                last = response
                if condition(response) { return response }
            }
            guard ContinuousClock.now < deadline else { break }
            try await Task.sleep(for: .milliseconds(100))
        }
        Issue.record("\(path) never met the condition; last: \(last.status) \(last.body.prefix(2000))")
        return last
    }

    /// The value of one sample line (`name{labels} value`) of a Prometheus text exposition.
    static func value(_ sample: String, in metrics: String) -> Double? {
        metrics.split(separator: "\n").first { $0.hasPrefix(sample + " ") }
            .flatMap { Double($0.split(separator: " ").last ?? "") }
    }

    @Test func metricsMoveAndReadinessFollowsTheBroker() async throws {
        let broker = try await MosquittoBroker()
        let port = try MosquittoBroker.freePort()
        let bridge = try ChildProcess(
            executable: try BuiltProducts.path("accessory-bridge"),
            arguments: ["--broker", "mqtt://127.0.0.1:\(broker.port)", "--http-port", "\(port)", "--log-level", "warning"],
            outputPath: broker.directory.appendingPathComponent("bridge.log").path)
        defer { bridge.signal(SIGKILL) }

        #expect(try await Self.waitFor(port, "/health/ready") { $0.status == 200 }.body == "ready\n")
        #expect(try await Self.get(port, "/health/live").status == 200)
        let before = try await Self.get(port, "/metrics")
        #expect(before.status == 200)
        #expect(Self.value("accessory_bridge_broker_connected", in: before.body) == 1)
        #expect(Self.value(#"accessory_bridge_commands_total{action="ROUTE_TO_ACCESSORY"}"#, in: before.body) == 0)
        #expect(before.body.contains(#"accessory_bridge_info{version=""#))

        // A hub pairs, registers and puts on the headphones while the phone plays.
        let hub = try await Peer("hub", broker: broker, subscribe: ["audio/hubs/#", "audio/sources/+/commands"])
        try await BridgeIntegrationTests.setUpHeadphones(hub)
        try hub.report(.media, source: BridgeIntegrationTests.phone)
        #expect(try await hub.request(.placement(.inEar), sequence: 4).error == .none)
        _ = try await hub.waitForCommands(1, for: BridgeIntegrationTests.phone)

        let after = try await Self.get(port, "/metrics").body
        #expect(Self.value(#"accessory_bridge_results_total{error="none"}"#, in: after) == 4)
        #expect(Self.value(#"accessory_bridge_commands_total{action="ROUTE_TO_ACCESSORY"}"#, in: after) == 1)
        #expect(Self.value(#"accessory_bridge_messages_received_total{kind="telemetry"}"#, in: after) == 4)
        #expect(Self.value("accessory_bridge_message_handling_seconds_count", in: after) ?? 0 >= 5)
        #expect(Self.value("accessory_bridge_message_to_command_seconds_count", in: after) == 1)
        #expect(Self.value(#"accessory_bridge_message_to_command_seconds_bucket{le="+Inf"}"#, in: after) == 1)
        // The gauges follow within a statistics interval (10 s).
        let gauges = try await Self.waitFor(port, "/metrics") {
            Self.value("accessory_bridge_accessories_routed", in: $0.body) == 1
        }.body
        #expect(Self.value(#"accessory_bridge_accessories{registration="registered"}"#, in: gauges) == 1)
        #expect(Self.value("accessory_bridge_accessories_worn", in: gauges) == 1)
        #expect(Self.value(#"accessory_bridge_sources{activity="media"}"#, in: gauges) == 1)
        #expect(!gauges.contains("headphones") && !gauges.contains("hub-1"), "no id is a label")

        // The broker goes: not ready, and says why; it comes back: ready again, one reconnection counted.
        await broker.stop()
        let down = try await Self.waitFor(port, "/health/ready") { $0.status == 503 }
        #expect(down.body.contains("not connected to the broker"))
        // Readiness asks the client, which knows first; the gauge follows once the bridge has heard of it.
        _ = try await Self.waitFor(port, "/metrics") { Self.value("accessory_bridge_broker_connected", in: $0.body) == 0 }
        #expect(try await Self.get(port, "/health/live").status == 200)
        try await broker.restart()
        _ = try await Self.waitFor(port, "/health/ready") { $0.status == 200 }
        let back = try await Self.waitFor(port, "/metrics") {
            Self.value("accessory_bridge_broker_reconnects_total", in: $0.body) == 1
        }
        #expect(Self.value("accessory_bridge_broker_connected", in: back.body) == 1)
        await hub.close()

        bridge.signal(SIGTERM)
        #expect(try await bridge.exit() == 0)
    }

    @Test func noHTTPListensNowhere() async throws {
        let broker = try await MosquittoBroker()
        let port = try MosquittoBroker.freePort()
        let observer = try await Peer("status", broker: broker, subscribe: ["audio/bridge/status"])
        let bridge = try ChildProcess(
            executable: try BuiltProducts.path("accessory-bridge"),
            arguments: ["--broker", "mqtt://127.0.0.1:\(broker.port)", "--http-port", "\(port)", "--no-http"],
            outputPath: broker.directory.appendingPathComponent("bridge.log").path)
        _ = try await observer.waitFor(1, on: "audio/bridge/status", timeout: .seconds(30))
        await #expect(throws: (any Error).self) { try await Self.get(port, "/health/live") }
        bridge.signal(SIGTERM)
        #expect(try await bridge.exit() == 0)
        await observer.close()
    }
}
