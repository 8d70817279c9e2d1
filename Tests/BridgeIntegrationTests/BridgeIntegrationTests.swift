import AccessoryBridge
import AccessoryControl
import AccessoryModel
import CoreMetrics
@testable import AccessoryWire
import Foundation
import MQTTClient
import MetricsTestKit
import Testing
import TestSupport

/// The running bridge against a real mosquitto: every test starts its own broker on a free port.
@Suite struct BridgeIntegrationTests {
    static let phone = BluetoothAddress("12:34:56:78:9A:BC")!
    static let commandsTopic = Topic.sourceCommands(source: phone).name(under: .default)

    /// Starts the bridge and waits for its online status, which it publishes after its subscriptions.
    static func startBridge(
        on broker: MosquittoBroker, metrics: any MetricsFactory = NOOPMetricsHandler.instance,
        configure: (inout BridgeConfiguration) -> Void = { _ in }
    ) async throws -> RunningBridge {
        let observer = try await Peer("status", broker: broker, subscribe: ["audio/bridge/status"])
        let bridge = try RunningBridge(broker: broker, metrics: metrics, configure: configure)
        let status = try await observer.waitFor(1, on: "audio/bridge/status", timeout: .seconds(30))[0]
        let format = try PayloadFormat.detect(contentType: status.properties.contentType, payload: status.payload)
        #expect(try WireCodec().decode(Audioaccessory_V1_BridgeStatus.self, from: status.payload, format: format).online)
        await observer.close()
        return bridge
    }

    /// Pair, register and connect the headphones to the phone, through `hub`.
    static func setUpHeadphones(_ hub: Peer) async throws {
        #expect(try await hub.request(.paired(name: "Studio", model: "S", hardwareCapabilities: .all), sequence: 1).error == .none)
        #expect(try await hub.request(.register(.all), sequence: 2).error == .none)
        #expect(try await hub.request(.sources(primary: phone.data, secondary: nil), sequence: 3).error == .none)
    }

    /// With the publishing session (the default) and without: publishing through the one connection that receives.
    @Test(arguments: [true, false]) func theTour(publishingSession: Bool) async throws {
        let broker = try await MosquittoBroker()
        let bridge = try await Self.startBridge(on: broker) { $0.publishingSession = publishingSession }
        let hub = try await Peer("hub", broker: broker, subscribe: ["audio/hubs/#"])
        let results = "audio/hubs/hub-1/accessories/headphones/result"
        let device = try await Peer("phone", broker: broker, subscribe: [Self.commandsTopic, results])

        try await Self.setUpHeadphones(hub)
        let on = try await hub.request(.placement(.onHead), sequence: 4)
        #expect(on.error == .none)
        #expect(on.state.configuration.devicePlacement == .onHead)
        // A command for the placement would leave before its result, and reach the device first: once the device has
        // the result, nothing plays yet.
        _ = try await device.waitFor(4, on: results)
        #expect(try device.commands(for: Self.phone).isEmpty, "nothing plays yet")

        // Start media on the phone: it is routed to the worn headphones.
        try device.report(.media, source: Self.phone)
        var commands = try await device.waitForCommands(1, for: Self.phone)
        #expect(commands.map(\.action) == [.routeToAccessory])
        #expect(commands[0].reason == .sourceActivated)
        #expect(commands[0].accessoryID == "headphones")

        // Take them off: PAUSE at once.
        #expect(try await hub.request(.placement(.offHead), sequence: 5).error == .none)
        commands = try await device.waitForCommands(2, for: Self.phone)
        #expect(commands[1].action == .pause)
        #expect(commands[1].reason == .takenOff)

        // Put them back within the resume window: ROUTE and RESUME.
        #expect(try await hub.request(.placement(.inEar), sequence: 6).error == .none)
        commands = try await device.waitForCommands(4, for: Self.phone)
        #expect(commands[2...].map(\.action) == [.routeToAccessory, .resume])
        let first = commands[0].sequence
        #expect(first > 1_700_000_000_000_000, "above the bridge's start in ms × 1000")
        #expect(commands.map(\.sequence) == [first, first + 1, first + 2, first + 3])
        #expect(Set(commands.map(\.commandID)).count == 4)

        // An error: another hub cannot touch these headphones.
        let refused = try await hub.request(.placement(.offHead), hub: "hub-2", sequence: 7)
        #expect(refused.error == .invalidRequest)
        #expect(refused.message.contains("belongs to another hub"))
        #expect(!refused.hasState, "another hub sees nothing of it")

        // A late subscriber reads the retained state at once.
        let late = try await Peer("late", broker: broker, subscribe: ["audio/accessories/headphones/state"])
        let retained = try await late.waitFor(1, on: "audio/accessories/headphones/state")[0]
        #expect(retained.retain)
        let state = try WireCodec().decode(Audioaccessory_V1_AccessoryState.self, from: retained.payload, format: .protobuf)
        #expect(state.configuration.devicePlacement == .inEar)
        #expect(state.routedSource == Self.phone.data)
        #expect(state.lastSequence == 6)

        for peer in [hub, device, late] { await peer.close() }
        try await bridge.stop()
    }

    /// Each AudioAccessoryKit error, and how to provoke it.
    enum Provocation: String, CaseIterable, Sendable {
        case accessoryNotCapable, invalidRequest, invalidated, unknown
    }

    @Test(arguments: Provocation.allCases)
    func eachErrorArrivesOnTheResultAndResponseTopics(_ provocation: Provocation) async throws {
        let broker = try await MosquittoBroker()
        let bridge = try await Self.startBridge(on: broker)
        let replies = "audio/hubs/hub-1/responses/\(provocation)"
        let hub = try await Peer("hub", broker: broker, subscribe: ["audio/hubs/hub-1/#", replies])
        let resultTopic = "audio/hubs/hub-1/accessories/headphones/result"
        let correlation: [UInt8] = Array("corr-\(provocation)".utf8) + [0, 255]

        let telemetry: [UInt8]
        switch provocation {
        case .accessoryNotCapable:
            try await hub.request(.paired(name: "Buds", model: "B", hardwareCapabilities: .audioSwitching))
            telemetry = hub.codec.encode(Audioaccessory_V1_AccessoryTelemetry(.register(.all)), as: .protobuf)
        case .invalidRequest:
            telemetry = hub.codec.encode(Audioaccessory_V1_AccessoryTelemetry(.register(.all)), as: .protobuf)
        case .invalidated:
            try await hub.request(.paired(name: "Studio", model: "S", hardwareCapabilities: .all))
            try await hub.request(.register(.all))
            try await hub.request(.paired(name: "Studio", model: "S", hardwareCapabilities: .all))
            telemetry = hub.codec.encode(Audioaccessory_V1_AccessoryTelemetry(.placement(.onHead)), as: .protobuf)
        case .unknown:
            // Only a field of a newer schema (field 20): an event this bridge does not know.
            telemetry = [0xA2, 0x01, 0x00]
        }
        let before = hub.messages(on: resultTopic).count
        try hub.client.publish(
            MQTTMessage(
                topic: "audio/hubs/hub-1/accessories/headphones/telemetry", payload: telemetry,
                properties: MQTTProperties(responseTopic: replies, correlationData: correlation)))

        let onResultTopic = try await hub.waitFor(before + 1, on: resultTopic)[before]
        let onResponseTopic = try await hub.waitFor(1, on: replies)[0]
        #expect(onResponseTopic.properties.correlationData == correlation)
        #expect(onResponseTopic.payload == onResultTopic.payload)
        let result = try hub.codec.decode(Audioaccessory_V1_RequestResult.self, from: onResponseTopic.payload, format: .protobuf)
        #expect(result.error.code?.rawValue == provocation.rawValue, "\(result.message)")
        #expect(!result.message.isEmpty)

        await hub.close()
        try await bridge.stop()
    }

    @Test func jsonFromTheRealMosquittoPubReachesTheRealMosquittoSub() async throws {
        let broker = try await MosquittoBroker()
        let bridge = try await Self.startBridge(on: broker) { $0.payloadFormat = .json }
        let subscriber = try await broker.startSubscriber(topic: Self.commandsTopic, count: 1, timeout: .seconds(30))
        let telemetry = "audio/hubs/hub-1/accessories/headphones/telemetry"
        for json in [
            #"{"sequence": "1", "paired": {"name": "Studio", "hardwareCapabilities": ["CAPABILITY_AUDIO_SWITCHING", "CAPABILITY_PLACEMENT"]}}"#,
            #"{"sequence": "2", "register": {"capabilities": ["CAPABILITY_AUDIO_SWITCHING", "CAPABILITY_PLACEMENT"]}}"#,
            #"{"sequence": "3", "sources": {"primary": "EjRWeJq8"}}"#,
            #"{"sequence": "4", "placement": {"placement": "PLACEMENT_ON_HEAD"}}"#,
        ] {
            try await broker.publish(topic: telemetry, message: json, qos: 1)
        }
        try await broker.publish(
            topic: "audio/sources/123456789abc/state", message: #"{"activity": "ACTIVITY_MEDIA"}"#, qos: 1, retain: true)
        let lines = try await subscriber.output()
        #expect(lines.count == 1)
        #expect(lines.first?.hasPrefix(Self.commandsTopic + " {") == true, "\(lines)")
        #expect(lines.first?.contains(#""action":"ACTION_ROUTE_TO_ACCESSORY""#) == true, "\(lines)")
        try await bridge.stop()
    }

    @Test func theBridgesWillSaysOfflineWhenItsProcessIsKilled() async throws {
        let broker = try await MosquittoBroker()
        let observer = try await Peer("status", broker: broker, subscribe: ["audio/bridge/status"])
        let bridge = try ChildProcess(
            executable: try BuiltProducts.path("accessory-bridge"),
            arguments: ["--broker", "mqtt://127.0.0.1:\(broker.port)", "--http-port", "0", "--client-id", "killed-bridge", "--log-level", "warning"],
            outputPath: broker.directory.appendingPathComponent("bridge.log").path)
        let online = try await observer.waitFor(1, on: "audio/bridge/status", timeout: .seconds(30))[0]
        #expect(try observer.codec.decode(Audioaccessory_V1_BridgeStatus.self, from: online.payload, format: .protobuf).online)

        bridge.signal(SIGKILL)
        let offline = try await observer.waitFor(2, on: "audio/bridge/status")[1]
        let status = try observer.codec.decode(Audioaccessory_V1_BridgeStatus.self, from: offline.payload, format: .protobuf)
        #expect(!status.online)
        #expect(status.version == Release.version)
        // Forwarded to a subscriber that was there, the will loses its RETAIN flag (MQTT 5, retain-as-published
        // off); a newcomer gets the retained copy.
        let late = try await Peer("late", broker: broker, subscribe: ["audio/bridge/status"])
        let retained = try await late.waitFor(1, on: "audio/bridge/status")[0]
        #expect(retained.retain)
        #expect(!(try late.codec.decode(Audioaccessory_V1_BridgeStatus.self, from: retained.payload, format: .protobuf).online))
        await observer.close()
        await late.close()
    }

    /// Out of ReliabilityTests, which runs one test at a time: most of its ten seconds go to the bridge's hub offline
    /// grace, which needs no CPU.
    @Test func aHubsWillMakesItsAccessoriesStaleUntilItIsBack() async throws {
        let broker = try await MosquittoBroker()
        let bridge = try await Self.startBridge(on: broker)
        let hub = try await Peer("hub", broker: broker, subscribe: ["audio/hubs/#", "audio/accessories/#", "audio/sources/+/commands"])
        try await Self.setUpHeadphones(hub)
        #expect(try await hub.request(.placement(.onHead), sequence: 4).error == .none)
        let phone = Self.phone
        try hub.report(.media, source: phone)
        _ = try await hub.waitForCommands(1, for: phone)

        // The hub's process: announces itself with a will whose empty payload is an all-default HubStatus, offline.
        let hubProcess = try await broker.startSubscriber(
            topic: "audio/hubs/hub-1/rebirth", count: 1, timeout: .seconds(30), qos: 1,
            arguments: ["--will-topic", "audio/hubs/hub-1/status", "--will-payload", "", "--will-retain", "--will-qos", "1"])
        let stateTopic = "audio/accessories/headphones/state"
        let states = hub.messages(on: stateTopic).count
        hubProcess.kill()
        // The next states: a stale one comes (one for the media report may come before it).
        var state = Audioaccessory_V1_AccessoryState()
        try await waitUntil("a stale state") {
            guard let last = hub.messages(on: stateTopic).dropFirst(states).last else { return false }
            state = try hub.codec.decode(Audioaccessory_V1_AccessoryState.self, from: last.payload, format: .protobuf)
            return state.stale
        }
        #expect(state.stale)
        #expect(state.diagnostics.contains { $0.contains("hub hub-1 is offline") })
        let released = try await hub.waitForCommands(2, for: phone)
        #expect(released.last?.action == .release, "a stale accessory takes no part")

        // Back: it reports again.
        #expect(try await hub.request(.placement(.onHead), sequence: 5).state.stale == false)
        await hub.close()
        try await bridge.stop()
    }

    @Test func sigtermStopsTheProcessGracefullyWithJSONLogs() async throws {
        let broker = try await MosquittoBroker()
        let observer = try await Peer("status", broker: broker, subscribe: ["audio/bridge/status"])
        let log = broker.directory.appendingPathComponent("bridge.log")
        let bridge = try ChildProcess(
            executable: try BuiltProducts.path("accessory-bridge"),
            arguments: ["--broker", "mqtt://127.0.0.1:\(broker.port)", "--http-port", "0", "--log-format", "json", "--password", "hunter2",
                "--username", "bridge"],
            outputPath: log.path)
        _ = try await observer.waitFor(1, on: "audio/bridge/status")
        bridge.signal(SIGTERM)
        #expect(try await bridge.exit() == 0)
        let statuses = try await observer.waitFor(2, on: "audio/bridge/status")
        #expect(statuses.count == 2)
        #expect(!(try observer.codec.decode(Audioaccessory_V1_BridgeStatus.self, from: statuses[1].payload, format: .protobuf).online))
        // A clean DISCONNECT (an abrupt loss would read "closed its connection" or "socket error").
        try await broker.waitForLog("Client accessory-bridge disconnected.")

        let lines = try String(contentsOf: log, encoding: .utf8).split(separator: "\n")
        #expect(lines.count >= 3, "\(lines)")
        for line in lines {
            let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
            #expect(object?["message"] is String && object?["level"] is String && object?["time"] is String, "\(line)")
        }
        #expect(lines.contains { $0.contains(#""message":"shutting down""#) })
        #expect(!lines.contains { $0.contains("hunter2") }, "the password is never logged")
        await observer.close()
    }

    @Test func aGracefulShutdownPublishesOffline() async throws {
        let broker = try await MosquittoBroker()
        let bridge = try await Self.startBridge(on: broker)
        try await bridge.stop()
        let late = try await Peer("late", broker: broker, subscribe: ["audio/bridge/status"])
        let retained = try await late.waitFor(1, on: "audio/bridge/status")[0]
        #expect(!(try late.codec.decode(Audioaccessory_V1_BridgeStatus.self, from: retained.payload, format: .protobuf).online))
        await late.close()
    }

    @Test func theClientsRegisterCurrentUpdateRoundTrip() async throws {
        let broker = try await MosquittoBroker()
        let bridge = try await Self.startBridge(on: broker)
        var mqtt = MQTTConfiguration(clientID: "companion")
        mqtt.port = broker.port
        let hub = try AccessoryHub(hubID: HubID("hub-7")!, mqtt: mqtt, logger: .init(label: "hub"))
        try await hub.start()

        let accessory = try await hub.pair(AccessoryID("studio")!, name: "Studio", model: "S", hardwareCapabilities: .all)
        #expect(throws: AccessoryControlError.self) { try AccessoryControlDevice.current(for: accessory) }
        try await AccessoryControlDevice.register(accessory, [.audioSwitching, .placement])
        let device = try AccessoryControlDevice.current(for: accessory)
        #expect(device.configuration.deviceCapabilities == [.audioSwitching, .placement])
        var configuration = device.configuration
        configuration.devicePlacement = .onHead
        configuration.primaryAudioSourceDeviceIdentifier = Self.phone.data
        try await device.update(configuration)
        #expect(try AccessoryControlDevice.current(for: accessory).configuration == configuration)

        do {
            var wrong = configuration
            wrong.deviceCapabilities = [.audioSwitching]
            wrong.devicePlacement = nil
            try await AccessoryControlDevice.current(for: accessory).update(wrong)
            Issue.record("changing the capabilities by update must fail")
        } catch AccessoryControlDevice.Error.invalidRequest(let reason) {
            #expect(reason.contains("register again to change them"))
        }
        await hub.stop()
        try await bridge.stop()
    }

    @Test func theSeedsSamplesBehaveAsTheSeedsDescribe() async throws {
        let broker = try await MosquittoBroker()
        let bridge = try await Self.startBridge(on: broker)
        let log = broker.directory.appendingPathComponent("example.log")
        let example = try ChildProcess(
            executable: try BuiltProducts.path("companion-example"), arguments: ["mqtt://127.0.0.1:\(broker.port)"],
            outputPath: log.path)
        let status = try await example.exit()
        let output = try String(contentsOf: log, encoding: .utf8)
        #expect(status == 0, "\(output)")
        #expect(output.contains("every sample behaved as the seeds describe"), "\(output)")
        #expect(output.contains("throws .accessoryNotCapable"), "\(output)")
        try await bridge.stop()
    }

    @Test func accessoryctlPrintsTheErrorAndItsReason() async throws {
        let broker = try await MosquittoBroker()
        let metrics = TestMetrics()
        let bridge = try await Self.startBridge(on: broker, metrics: metrics)
        func accessoryctl(_ arguments: String...) async throws -> (Int32, String) {
            let log = broker.directory.appendingPathComponent("accessoryctl-\(UUID().uuidString).log")
            let process = try ChildProcess(
                executable: try BuiltProducts.path("accessoryctl"),
                arguments: arguments + ["--broker", "mqtt://127.0.0.1:\(broker.port)"], outputPath: log.path)
            let status = try await process.exit()
            return (status, try String(contentsOf: log, encoding: .utf8))
        }
        var (status, output) = try await accessoryctl("pair", "buds", "--capabilities", "audioSwitching")
        #expect(status == 0, "\(output)")
        #expect(output.contains("paired buds"))
        (status, output) = try await accessoryctl("register", "buds", "--capabilities", "audioSwitching,placement")
        #expect(status == 1)
        #expect(output.contains("error: accessoryNotCapable: accessory buds cannot register [.placement]"), "\(output)")
        (status, output) = try await accessoryctl("state", "buds")
        #expect(status == 0, "\(output)")
        #expect(output.contains("state   buds, hub hub-1, paired"), "\(output)")

        // update, with watch printing what goes by: the two retained messages (bridge status, state), then a
        // state and a result for each command.
        let watchLog = broker.directory.appendingPathComponent("watch.log")
        let watch = try ChildProcess(
            executable: try BuiltProducts.path("accessoryctl"),
            arguments: ["watch", "--count", "7", "--broker", "mqtt://127.0.0.1:\(broker.port)"], outputPath: watchLog.path)
        // Its subscriptions are in place once it printed the retained messages of its last ones (its output goes out
        // line by line). Not the broker's log: the bridge subscribes to the same filters.
        try await waitUntil("watch printing the retained bridge status") {
            let printed = (try? String(contentsOf: watchLog, encoding: .utf8)) ?? ""
            return printed.contains("bridge  online") && printed.contains("state   buds")
        }
        (status, output) = try await accessoryctl("register", "buds", "--capabilities", "audioSwitching")
        #expect(status == 0, "\(output)")
        (status, output) = try await accessoryctl(
            "update", "buds", "--capabilities", "audioSwitching", "--primary", "12:34:56:78:9A:BC")
        #expect(status == 0, "\(output)")
        #expect(try await watch.exit() == 0)
        let watched = try String(contentsOf: watchLog, encoding: .utf8)
        #expect(watched.contains("state   buds, hub hub-1, registered, [.audioSwitching]"), "\(watched)")
        #expect(watched.contains("result  hub-1/buds"), "\(watched)")
        #expect(watched.contains("layout  a single bridge (bridge \(Release.version))"), "\(watched)")
        (status, output) = try await accessoryctl("state", "buds")
        #expect(output.contains("sources [12:34:56:78:9A:BC]"), "\(output)")
        // The bridge's layout, and --slots bridge reading it: a single bridge's topics are under the root.
        (status, output) = try await accessoryctl("layout")
        #expect(status == 0 && output == "layout  a single bridge (bridge \(Release.version))\n", "\(output)")
        (status, output) = try await accessoryctl("state", "buds", "--slots", "bridge")
        #expect(status == 0 && output.contains("sources [12:34:56:78:9A:BC]"), "\(output)")

        // source: the phone starts media; buds (no .placement: worn while it has a source) get it.
        (status, output) = try await accessoryctl("source", "12:34:56:78:9A:BC", "--activity", "media", "--count", "1")
        #expect(status == 0, "\(output)")
        #expect(output.contains("command ROUTE_TO_ACCESSORY 12:34:56:78:9A:BC to buds (SOURCE_ACTIVATED) #"), "\(output)")
        // Each run spoke for hub-1 without counting in its sequence: no gap for the bridge to ask the hub about. (The
        // bridge counts a rebirth request after the answer to the request that caused it: every run's but this last
        // one's was counted before the bridge answered the next run, which it handles after.)
        (status, output) = try await accessoryctl("sources", "buds", "12:34:56:78:9A:BC")
        #expect(status == 0 && output.contains("connected buds"), "\(output)")
        #expect(try metrics.expectCounter("accessory_bridge_rebirth_requests_total").totalValue == 0)
        try await bridge.stop()
    }

    @Test func aRequestTheBridgeDoesNotAnswerThrowsUnknown() async throws {
        let broker = try await MosquittoBroker()  // and no bridge
        var mqtt = MQTTConfiguration(clientID: "lonely-hub")
        mqtt.port = broker.port
        var options = AccessoryHub.Options()
        options.timeout = .milliseconds(300)
        let hub = try AccessoryHub(hubID: HubID("hub-1")!, mqtt: mqtt, options: options, logger: .init(label: "hub"))
        try await hub.start()
        do {
            _ = try await hub.pair(AccessoryID("studio")!, name: "", model: "", hardwareCapabilities: .all)
            Issue.record("without a bridge, pairing cannot succeed")
        } catch {
            #expect(error.code == .unknown)
            #expect(error.reason.contains("did not answer paired within"), "\(error.reason)")
        }
        await hub.stop()
    }
}
