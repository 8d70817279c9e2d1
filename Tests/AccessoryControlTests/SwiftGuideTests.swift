import AccessoryControl
import AccessoryModel
import Foundation
import Logging
import MQTTClient
import Testing
import TestSupport

/// docs/swift.md's code, compiled: every ```swift block of the page stands, line for line, in one of the functions
/// below, which are compiled with the tests and never run (the page's code needs a bridge; the tests of each API run
/// it). A page that names an API that does not exist, or calls one as it is not, fails to build or fails this test.
@Suite struct SwiftGuideTests {
    static let page = "docs/swift.md"

    @Test func everySwiftBlockOfTheGuideIsCompiledHere() throws {
        let here = URL(fileURLWithPath: #filePath)
        let blocks = try RepositoryFiles.blocks(of: Self.page, info: "swift", missingFrom: here)
        #expect(blocks.count >= 5, "\(Self.page) has its Swift blocks")
        for block in blocks.missing {
            Issue.record("the block at line \(block.line) of \(Self.page) is not in \(here.lastPathComponent):\n\(block.text)")
        }
    }
}

// MARK: - The page's blocks, in its order

/// "A hub and its accessories".
private func pairingAndRegistering(logger: Logger) async throws {
    let hub = try AccessoryHub(hubID: HubID("hub-1")!, mqtt: MQTTConfiguration(clientID: "hub-1"), logger: logger)
    try await hub.start()
    let accessory = try await hub.pair(AccessoryID("headphones")!, name: "Studio Pro", model: "SP-2",
                                       hardwareCapabilities: [.audioSwitching, .placement])

    try await AccessoryControlDevice.register(accessory, [.audioSwitching, .placement])

    let device = try AccessoryControlDevice.current(for: accessory)
    var configuration = device.configuration
    configuration.devicePlacement = .onHead
    try await device.update(configuration)
}

/// iOS 27's configuration.
private func registeringASpatialExtension(_ accessory: PairedAccessory) async throws {
    let configuration = AccessoryControlDevice.Configuration(
        deviceCapabilities: [.audioSwitching, .placement, .audioSpatialization, .headTracking],
        spatialExtensionDescription: AudioComponentDescription(
            componentType: 0xaaf, componentSubType: 0xc0f, componentManufacturer: 0xb05e))
    try await AccessoryControlDevice.register(accessory, configuration)
}

/// The person's controls.
private func controls(logger: Logger) async throws {
    let controls = try AccessoryControlsClient(mqtt: MQTTConfiguration(clientID: "living-room"), logger: logger)
    try await controls.start()
    let state = try await controls.set(AccessoryControls(automaticSwitching: false), for: AccessoryID("headphones")!)
    try await controls.set(AccessoryControls(pin: .source(BluetoothAddress("12:34:56:78:9A:BC")!)), for: state.accessory.id)
}

/// The hub's side of head tracking.
private func headTracking(_ accessory: PairedAccessory) {
    final class Tracker: AudioAccessoryHeadTracking.Handler {
        func activate(for session: AudioAccessoryHeadTracking.Session) {
            imu.onSample { frame in try? session.sendDataToAudioExtension(frame) }   // 1-70 bytes
            if session.isHeadTrackingActive { imu.start() }
        }
        func headTrackingStateDidChange(isActive: Bool) { isActive ? imu.start() : imu.stop() }
        func invalidate() { imu.stop() }
    }

    let headTracking = AudioAccessoryHeadTracking(for: accessory) { Tracker() }
    _ = headTracking
}

/// The host's side.
private func hosting(logger: Logger) async throws {
    let host = try HeadTrackingHost(address: BluetoothAddress("12:34:56:78:9A:BC")!,
                                    mqtt: MQTTConfiguration(clientID: "phone"), logger: logger)
    try await host.start()
    try host.report(.media, headTracking: true)        // the device's SourceState, retained; setHeadTracking(_:) later

    Task { for await news in host.sessionNews() { print(news.event.kind, news.event.session.accessory) } }

    for await frame in host.sensorUpdates(for: AccessoryID("headphones")!) {
        renderer.apply(frame.data)                      // frame.sequence, frame.latency, frame.hub too
    }                                                   // ends when that session is invalidated: ask again for the next
}

// MARK: - What the page leaves to the reader

/// An accessory's IMU, as firmware would drive it.
private final class IMU: Sendable {
    func onSample(_ handler: @escaping @Sendable (Data) -> Void) {}
    func start() {}
    func stop() {}
}

/// The host's Spatial Audio renderer.
private final class Renderer: Sendable {
    func apply(_ frame: Data) {}
}

private let imu = IMU()
private let renderer = Renderer()
