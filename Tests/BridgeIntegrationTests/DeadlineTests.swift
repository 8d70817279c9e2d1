import AccessoryBridge
import AccessoryModel
@testable import AccessoryWire
import Foundation
import MQTTClient
import Testing
import TestSupport

/// Deadlines run on the client's network thread, which wakes for them: no timer task, no lock.
@Suite struct DeadlineTests {
    @Test func diagnosticsAndTheResumeWindowComeDueOnTheNetworkThread() async throws {
        let broker = try await MosquittoBroker()
        let bridge = try await BridgeIntegrationTests.startBridge(on: broker) {
            $0.policy.accessory.diagnosticsGracePeriod = .milliseconds(300)
            $0.policy.routing.resumeWindow = .milliseconds(300)
        }
        let hub = try await Peer("hub", broker: broker, subscribe: ["audio/hubs/#", "audio/accessories/#", "audio/sources/+/commands"])
        #expect(try await hub.request(.paired(name: "S", model: "S", hardwareCapabilities: .all), sequence: 1).error == .none)
        #expect(try await hub.request(.register(.all), sequence: 2).error == .none)
        // No placement and no source within 300 ms: both diagnostics, published by the wake-up alone.
        let stateTopic = "audio/accessories/headphones/state"
        var diagnostics: [String] = []
        try await waitUntil("both diagnostics") {
            diagnostics = try hub.messages(on: stateTopic).last.map {
                try hub.codec.decode(Audioaccessory_V1_AccessoryState.self, from: $0.payload, format: .protobuf).diagnostics
            } ?? []
            return diagnostics.count == 2
        }
        #expect(diagnostics.count == 2, "\(diagnostics)")

        // Taken off and put back after the resume window closed: routed again, but not resumed.
        let phone = BridgeIntegrationTests.phone
        #expect(try await hub.request(.sources(primary: phone.data, secondary: nil), sequence: 3).error == .none)
        #expect(try await hub.request(.placement(.onHead), sequence: 4).error == .none)
        try hub.report(.media, source: phone)
        _ = try await hub.waitForCommands(1, for: phone)
        #expect(try await hub.request(.placement(.offHead), sequence: 5).error == .none)
        _ = try await hub.waitForCommands(2, for: phone)
        // At least 600 ms pass on every clock before the accessory goes back on: the 300 ms window has closed.
        try await Task.sleep(for: .milliseconds(600))
        // The phone still says media, so it is routed again; but the pause is no longer remembered: no RESUME. A
        // RESUME would leave before the request's result, on the connection that brings both; the same request again
        // (a duplicate, answered with no command) shows that nothing came after the answer either.
        #expect(try await hub.request(.placement(.onHead), sequence: 6).error == .none)
        #expect(try await hub.request(.placement(.onHead), sequence: 6).duplicate)
        #expect(try hub.commands(for: phone).map(\.action) == [.routeToAccessory, .pause, .routeToAccessory])
        await hub.close()
        try await bridge.stop()
    }
}
