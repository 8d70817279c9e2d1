import AccessoryBridge
import AccessoryControl
import AccessoryModel
import AccessoryWire
import Foundation
import HeadTrackingFixtures
import Logging
import MQTTClient
import Synchronization
import Testing
import TestSupport

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Head tracking end to end (rule 13): a hub on ``AudioAccessoryHeadTracking``, playing devices on
/// ``HeadTrackingHost``, the real bridge deciding the sessions, a real mosquitto carrying the frames.
@Suite(.timeLimit(.minutes(3))) struct HeadTrackingEndToEndTests {
    static let phone = BluetoothAddress("12:34:56:78:9A:BC")!
    static let laptop = BluetoothAddress("AB:CD:EF:01:23:45")!
    static let headphones = AccessoryID("headphones")!
    static let hubID = HubID("hub-1")!
    static let spatialExtension = AudioComponentDescription(
        componentType: 0xaaf, componentSubType: 0xc0f, componentManufacturer: 0xb05e)

    static var logger: Logger {
        var logger = Logger(label: "head-tracking")
        logger.logLevel = .warning
        return logger
    }

    static func host(_ address: BluetoothAddress, on broker: MosquittoBroker) async throws -> HeadTrackingHost {
        var mqtt = MQTTConfiguration(clientID: "host-\(address.topicID)-\(UUID().uuidString.prefix(8))")
        mqtt.port = broker.port
        let host = try HeadTrackingHost(address: address, mqtt: mqtt, logger: logger)
        try await host.start(timeout: .seconds(20))
        return host
    }

    static func hub(on broker: MosquittoBroker) async throws -> AccessoryHub {
        var mqtt = MQTTConfiguration(clientID: "hub-1-\(UUID().uuidString.prefix(8))")
        mqtt.port = broker.port
        let hub = try AccessoryHub(hubID: hubID, mqtt: mqtt, logger: logger)
        try await hub.start(timeout: .seconds(20))
        return hub
    }

    /// Pairs and registers the headphones with head tracking and a spatial extension (iOS 27's register with a
    /// configuration), connected to `sources`.
    static func setUpHeadphones(on hub: AccessoryHub, sources: [BluetoothAddress]) async throws -> PairedAccessory {
        let accessory = try await hub.pair(headphones, name: "Studio", model: "S", hardwareCapabilities: .all)
        let configuration = AccessoryControlDevice.Configuration(
            deviceCapabilities: .all, spatialExtensionDescription: spatialExtension)
        try await AccessoryControlDevice.register(accessory, configuration)
        #expect(try AccessoryControlDevice.current(for: accessory).configuration.spatialExtensionDescription == spatialExtension)
        try await hub.report(primary: sources.first, secondary: sources.dropFirst().first, for: accessory)
        return accessory
    }

    static func frame(_ byte: UInt8, count: Int = 13) -> Data {
        Data(repeating: byte, count: count)
    }

    @Test func aHubStreamsItsAccessorysHeadMotionToTheHost() async throws {
        let broker = try await MosquittoBroker()
        let bridge = try await BridgeIntegrationTests.startBridge(on: broker)
        let host = try await Self.host(Self.phone, on: broker)
        let news = NewsLog(host)
        let hub = try await Self.hub(on: broker)

        // The phone plays media with head tracking on.
        try host.report(.media, headTracking: true)
        let accessory = try await Self.setUpHeadphones(on: hub, sources: [Self.phone])
        let log = SessionLog()
        let headTracking = AudioAccessoryHeadTracking(for: accessory) { SessionLog.Handler(log: log) }
        let frames = FrameCollector(host.sensorUpdates(for: Self.headphones))
        #expect(headTracking.session == nil, "not worn yet: no session")

        // Put on: routed to the phone, and the session begins, head tracking on.
        try await hub.report(placement: .onHead, for: accessory)
        let session = try await log.waitForActivation()
        #expect(session.isHeadTrackingActive)
        #expect(session.host == Self.phone && session.restorationID == "aab:headphones")
        #expect(headTracking.session === session)
        let activated = try await news.waitFor(1)[0]
        #expect(activated.event.kind == .activated && activated.hub == Self.hubID)
        #expect(activated.event.session.id.uuid == session.sessionID)
        #expect(host.session(of: Self.headphones)?.id.uuid == session.sessionID)

        // A 13-byte frame reaches the host's sensor updates.
        try session.sendDataToAudioExtension(Self.frame(1))
        try await frames.waitFor(1)
        let first = try #require(frames.all.first)
        #expect(first.data == Self.frame(1) && first.sequence == 1 && first.hub == Self.hubID)
        #expect(first.session.uuid == session.sessionID)
        #expect(first.latency >= .zero && first.latency < .seconds(10))
        // Out of bounds: nothing sent.
        for size in [0, 71] {
            #expect(throws: AudioAccessoryError.invalidDataSize) {
                try session.sendDataToAudioExtension(Data(repeating: 2, count: size))
            }
        }

        // The person turns head tracking off on the phone: the handler hears of it, and nothing can be sent.
        try host.setHeadTracking(false)
        try await log.waitFor("head tracking off") { $0.last == .stateChanged(false) }
        #expect(!session.isHeadTrackingActive)
        #expect(throws: AudioAccessoryError.notActivated) { try session.sendDataToAudioExtension(Self.frame(3)) }
        // And on again: frames flow again, and the host had none of the refused ones.
        try host.setHeadTracking(true)
        try await log.waitFor("head tracking on") { $0.last == .stateChanged(true) }
        try session.sendDataToAudioExtension(Self.frame(4, count: 70))
        try await frames.waitFor(2)
        #expect(frames.all.map(\.sequence) == [1, 2])
        #expect(frames.all.map(\.data) == [Self.frame(1), Self.frame(4, count: 70)])

        // Taken off: the session ends on both sides; the host's updates of that session end.
        try await hub.report(placement: .offHead, for: accessory)
        try await log.waitFor("the session's end") { $0.last == .invalidate(session.sessionID) }
        #expect(!session.isActive && headTracking.session == nil)
        #expect(throws: AudioAccessoryError.notActivated) { try session.sendDataToAudioExtension(Self.frame(5)) }
        try await waitUntil("the host's updates end") { frames.hasEnded }
        let ended = try await news.waitFor(4).map(\.event)
        #expect(ended.map(\.kind) == [.activated, .stateChanged, .stateChanged, .invalidated])
        #expect(ended.last?.reason == .takenOff)
        #expect(host.session(of: Self.headphones) == nil)
        let statistics = host.statistics(of: Self.headphones)
        #expect(statistics.received == 2 && statistics.dropped == 0 && statistics.missed == 0, "\(statistics)")
        #expect(log.calls == [
            .activate(session.sessionID, active: true), .stateChanged(false), .stateChanged(true),
            .invalidate(session.sessionID),
        ])

        headTracking.invalidate()
        await hub.stop()
        await host.stop()
        try await bridge.stop()
    }

    /// A call on the laptop takes the headphones from the phone's media (rule 6): the session moves with the route.
    /// The phone's session ends before the laptop's begins; the phone renders nothing after its end, not even a late
    /// frame of its old session; the laptop renders its own session's frames from the accessory's hub only.
    @Test func aCallOnAnotherHostMovesTheStream() async throws {
        let broker = try await MosquittoBroker()
        let bridge = try await BridgeIntegrationTests.startBridge(on: broker)
        let phone = try await Self.host(Self.phone, on: broker)
        let laptop = try await Self.host(Self.laptop, on: broker)
        let phoneNews = NewsLog(phone)
        let laptopNews = NewsLog(laptop)
        let hub = try await Self.hub(on: broker)
        // Another client that publishes frames by hand: late ones, forged ones, and markers.
        let forger = try await Peer("forger", broker: broker)

        try phone.report(.media, headTracking: true)
        try laptop.report(.idle, headTracking: false)
        let accessory = try await Self.setUpHeadphones(on: hub, sources: [Self.phone, Self.laptop])
        let log = SessionLog()
        let headTracking = AudioAccessoryHeadTracking(for: accessory) { SessionLog.Handler(log: log) }
        let phoneFrames = FrameCollector(phone.sensorUpdates(for: Self.headphones))
        let laptopFrames = FrameCollector(laptop.sensorUpdates(for: Self.headphones))

        try await hub.report(placement: .onHead, for: accessory)
        let first = try await log.waitForActivation()
        #expect(first.host == Self.phone)
        // The host takes frames of a session it has heard of: the news reaches the hub and the host apart.
        _ = try await phoneNews.waitFor(1)
        try first.sendDataToAudioExtension(Self.frame(1))
        try await phoneFrames.waitFor(1)

        // The call: the phone's session is invalidated, then the laptop's activated, head tracking off there.
        try laptop.report(.call, headTracking: false)
        let second = try await log.waitForActivation(2)
        #expect(second.host == Self.laptop && !second.isHeadTrackingActive)
        #expect(log.calls == [
            .activate(first.sessionID, active: true), .invalidate(first.sessionID),
            .activate(second.sessionID, active: false),
        ])
        #expect(second.sessionID != first.sessionID)
        _ = try await laptopNews.waitFor(1)
        #expect(throws: AudioAccessoryError.notActivated) { try first.sendDataToAudioExtension(Self.frame(2)) }
        // Head tracking is not active on the laptop yet: nothing can be sent.
        #expect(throws: AudioAccessoryError.notActivated) { try second.sendDataToAudioExtension(Self.frame(2)) }
        #expect(try await phoneNews.waitFor(2).map(\.event.kind) == [.activated, .invalidated])
        #expect(phoneNews.all.last?.event.reason == .routeMoved)
        try await waitUntil("the phone's updates end") { phoneFrames.hasEnded }

        // A late frame of the phone's old session reaches the phone, and is dropped; then a malformed payload, on the
        // same connection: once the phone has counted that, it has seen the late frame.
        let firstID = HeadTrackingSessionID(uuid: first.sessionID)
        let late = HeadTrackingFrame(session: firstID, sequence: 9, sentAtUnixMicroseconds: WallClock.unixMicroseconds(), data: [9])
        try forger.client.publish(MQTTMessage(
            topic: Topic.frames(host: Self.phone, hub: Self.hubID, accessory: Self.headphones).name(under: .default),
            payload: late.encoded, qos: .atMostOnce))
        try forger.client.publish(MQTTMessage(
            topic: Topic.frames(host: Self.phone, hub: Self.hubID, accessory: Self.headphones).name(under: .default),
            payload: [0xff], qos: .atMostOnce))
        try await waitUntil("the phone counts the malformed frame") { phone.statistics(of: Self.headphones).malformed == 1 }
        #expect(phone.statistics(of: Self.headphones).noSession == 1)
        #expect(phone.statistics(of: Self.headphones).received == 1 && phoneFrames.all.count == 1)

        // The person turns head tracking on, on the laptop: the stream moves there.
        try laptop.report(.call, headTracking: true)
        try await log.waitFor("head tracking on, on the laptop") { $0.last == .stateChanged(true) }
        try second.sendDataToAudioExtension(Self.frame(3))
        try await laptopFrames.waitFor(1)
        #expect(laptopFrames.all.map(\.data) == [Self.frame(3)])
        #expect(laptopFrames.all.first?.session.uuid == second.sessionID)

        // On the laptop: a frame of the phone's old session, one of the laptop's session from another hub, then a
        // frame of its session from its hub (a marker, on the same connection): only that one is rendered.
        let secondID = HeadTrackingSessionID(uuid: second.sessionID)
        let toLaptop = { (hub: HubID, session: HeadTrackingSessionID, sequence: UInt64) throws in
            try forger.client.publish(MQTTMessage(
                topic: Topic.frames(host: Self.laptop, hub: hub, accessory: Self.headphones).name(under: .default),
                payload: HeadTrackingFrame(
                    session: session, sequence: sequence, sentAtUnixMicroseconds: WallClock.unixMicroseconds(), data: [7]
                ).encoded, qos: .atMostOnce))
        }
        try toLaptop(Self.hubID, firstID, 50)
        try toLaptop(HubID("hub-2")!, secondID, 60)
        try toLaptop(Self.hubID, secondID, 100)
        try await laptopFrames.waitFor(2)
        #expect(laptopFrames.all.map(\.sequence) == [1, 100])
        let statistics = laptop.statistics(of: Self.headphones)
        #expect(statistics.otherSession == 1 && statistics.otherHub == 1 && statistics.missed == 98, "\(statistics)")
        #expect(try await laptopNews.waitFor(2).map(\.event.kind) == [.activated, .stateChanged])
        // The phone rendered nothing since its session ended.
        #expect(phoneFrames.all.count == 1 && phone.statistics(of: Self.headphones).received == 1)

        headTracking.invalidate()
        await forger.close()
        await hub.stop()
        await phone.stop()
        await laptop.stop()
        try await bridge.stop()
    }

    /// `accessoryctl register --spatial-extension`, `accessoryctl host` rendering a session (its news, and each
    /// second's frames and latency), and `accessoryctl source --head-tracking off` turning the setting off.
    @Test func accessoryctlHostsASessionAndTurnsHeadTrackingOff() async throws {
        let broker = try await MosquittoBroker()
        let bridge = try await BridgeIntegrationTests.startBridge(on: broker)
        func accessoryctl(_ arguments: String...) async throws -> (Int32, String) {
            let log = broker.directory.appendingPathComponent("accessoryctl-\(UUID().uuidString).log")
            let process = try ChildProcess(
                executable: try BuiltProducts.path("accessoryctl"),
                arguments: arguments + ["--broker", "mqtt://127.0.0.1:\(broker.port)"], outputPath: log.path)
            let status = try await process.exit()
            return (status, try String(contentsOf: log, encoding: .utf8))
        }
        let capabilities = "audioSwitching,placement,audioSpatialization,headTracking"
        var (status, output) = try await accessoryctl("pair", "headphones", "--capabilities", capabilities)
        #expect(status == 0, "\(output)")
        (status, output) = try await accessoryctl(
            "register", "headphones", "--capabilities", capabilities, "--spatial-extension", "aaf:c0f:b05e")
        #expect(status == 0, "\(output)")
        #expect(output.contains("spatial extension type 0xaaf, subtype 0xc0f, manufacturer 0xb05e"), "\(output)")
        // Without .audioSpatialization, a spatial extension is refused.
        (status, output) = try await accessoryctl(
            "register", "headphones", "--capabilities", "audioSwitching", "--spatial-extension", "0xaaf:0xc0f:0xb05e:0:0")
        #expect(status == 1 && output.contains("accessoryNotCapable"), "\(output)")
        (status, output) = try await accessoryctl(
            "register", "headphones", "--capabilities", capabilities, "--spatial-extension", "aaf:c0f:b05e")
        #expect(status == 0, "\(output)")

        let log = broker.directory.appendingPathComponent("host.log")
        let host = try ChildProcess(
            executable: try BuiltProducts.path("accessoryctl"),
            arguments: [
                "host", "12:34:56:78:9A:BC", "--activity", "media", "--head-tracking", "on", "--seconds", "120",
                "--broker", "mqtt://127.0.0.1:\(broker.port)",
            ],
            outputPath: log.path)
        func printed() -> String { (try? String(contentsOf: log, encoding: .utf8)) ?? "" }
        try await waitUntil("the host's first line") { printed().contains("host    12:34:56:78:9A:BC media, head tracking on") }

        let hub = try await Self.hub(on: broker)
        let accessory = hub.accessory(Self.headphones)
        let sessions = SessionLog()
        let headTracking = AudioAccessoryHeadTracking(for: accessory) { SessionLog.Handler(log: sessions) }
        try await hub.report(primary: Self.phone, secondary: nil, for: accessory)
        try await hub.report(placement: .onHead, for: accessory)
        let session = try await sessions.waitForActivation()
        #expect(session.isHeadTrackingActive)
        try await waitUntil("the host prints the activation") {
            printed().contains("session hub-1/headphones activated") && printed().contains("head tracking on (routed)")
        }
        // 100 frames a second until the host has reported a second of them.
        try await waitUntil("a second's frames and latency", timeout: .seconds(30)) {
            try session.sendDataToAudioExtension(Self.frame(1))
            return printed().contains("frames  headphones ") && printed().contains("latency p50 ")
        }

        (status, output) = try await accessoryctl(
            "source", "12:34:56:78:9A:BC", "--activity", "media", "--head-tracking", "off", "--count", "0")
        #expect(status == 0 && output.contains("head tracking off"), "\(output)")
        try await sessions.waitFor("head tracking off") { $0.last == .stateChanged(false) }
        #expect(throws: AudioAccessoryError.notActivated) { try session.sendDataToAudioExtension(Self.frame(2)) }
        try await waitUntil("the host prints the change") {
            printed().contains("session hub-1/headphones state_changed") && printed().contains("head tracking off (switchChanged)")
        }
        // current(for:) with iOS 27's half: the extension as it was typed, and the session the state retains.
        let retained = "spatial extension aaf:c0f:b05e, head tracking session on 12:34:56:78:9A:BC, head tracking off, "
        try await waitUntil("the retained state has the switch off") {
            try await accessoryctl("state", "headphones").1.contains(retained)
        }
        host.signal(SIGTERM)
        #expect(try await host.exit(timeout: .seconds(10)) == 0)
        let line = try #require(printed().split(separator: "\n").first { $0.hasPrefix("frames  headphones") })
        #expect(line.contains("/s, latency p50 ") && line.contains(" ms p99 ") && line.contains("dropped 0"), "\(line)")

        headTracking.invalidate()
        await hub.stop()
        try await bridge.stop()
    }
}
