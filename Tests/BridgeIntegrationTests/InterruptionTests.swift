import AccessoryBridge
import AccessoryModel
@testable import AccessoryWire
import Foundation
import MQTTClient
import Testing
import TestSupport

/// Rule 11 through a real broker and bridge: media a call displaced comes back when the call ends.
@Suite struct InterruptionIntegrationTests {
    @Test func mediaComesBackAfterACallOnTheOtherDevice() async throws {
        let broker = try await MosquittoBroker()
        let bridge = try await BridgeIntegrationTests.startBridge(on: broker)
        let hub = try await Peer("hub", broker: broker, subscribe: ["audio/hubs/#", "audio/sources/+/commands"])
        let phone = BluetoothAddress("12:34:56:78:9A:BC")!
        let laptop = BluetoothAddress("AB:CD:EF:01:23:45")!
        #expect(try await hub.request(.paired(name: "S", model: "S", hardwareCapabilities: .all), sequence: 1).error == .none)
        #expect(try await hub.request(.register(.all), sequence: 2).error == .none)
        #expect(try await hub.request(.sources(primary: phone.data, secondary: laptop.data), sequence: 3).error == .none)
        #expect(try await hub.request(.placement(.inEar), sequence: 4).error == .none)
        try hub.report(.media, source: phone)
        _ = try await hub.waitForCommands(1, for: phone)  // ROUTE
        try hub.report(.call, source: laptop)
        let paused = try await hub.waitForCommands(2, for: phone)
        #expect(paused.last?.action == .pause && paused.last?.reason == .sourceActivated)
        try hub.report(.idle, source: laptop)  // hung up
        let back = try await hub.waitForCommands(4, for: phone)
        #expect(back[2...].map(\.action) == [.routeToAccessory, .resume])
        #expect(back[2...].allSatisfy { $0.reason == .interruptionEnded })
        let released = try await hub.waitForCommands(2, for: laptop)
        #expect(released.map(\.action) == [.routeToAccessory, .release])
        #expect(released.last?.reason == .interruptionEnded)
        await hub.close()
        try await bridge.stop()
    }
}
