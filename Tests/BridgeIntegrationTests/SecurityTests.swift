import AccessoryBridge
import AccessoryControl
import AccessoryModel
@testable import AccessoryWire
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

/// The broker secured as deploy/mosquitto secures it: its mosquitto.conf as shipped (one TLS listener, certificates
/// from make-certs.sh), a password for every client, and a role for each (the dynamic security plugin, set up as
/// `accessoryctl roles` does). The clients are the real bridge, hubs, playing devices and a home-automation user. The
/// older set-up, a password file and deploy/mosquitto/acl, is checked for its documented limit.
///
/// What mosquitto 2.0.11 does with the roles (and with the ACL file alike), and what these tests rely on: a PUBLISH
/// the sender may not write is dropped (an MQTT 5 QoS 1 sender gets PUBACK 0x87); every subscription is granted,
/// whatever its filter, and only what the subscriber may read is delivered, retained messages included. So a check
/// that something does NOT arrive never sleeps: it first makes something arrive that the broker or the bridge can only
/// send after it, on the same connection (mosquitto handles each client's packets in order, and the bridge handles
/// messages in order).
@Suite struct SecurityTests {
    static let deploy = RepositoryFiles.url("deploy/mosquitto")

    // The users, named as deploy/mosquitto/acl expects.
    static let bridgeUser = "bridge.audio"
    static let homeAutomation = "home.automation"
    static let hub1 = "hub-1"
    static let hub2 = "hub-2"
    static let source1 = BluetoothAddress(topicID: "aaaaaaaaaaa1")!
    static let source2 = BluetoothAddress(topicID: "aaaaaaaaaaa2")!
    static let allUsers = [bridgeUser, homeAutomation, hub1, hub2, source1.topicID, source2.topicID]

    static func commandsTopic(_ source: BluetoothAddress) -> String {
        Topic.sourceCommands(source: source).name(under: .default)
    }

    static func stateTopic(_ accessory: String) -> String { "audio/accessories/\(accessory)/state" }

    // MARK: - (1) The bridge over TLS, with its password

    @Test func theBridgeWorksOverTLSWithItsPassword() async throws {
        let secure = try await SecureBroker()
        let bridge = try await Self.startBridge(on: secure)
        let observer = try await Client(
            Self.homeAutomation, on: secure, subscribe: ["audio/accessories/+/state", "audio/hubs/+/status"])
        let device = try await Client(Self.source1.topicID, on: secure, subscribe: [Self.commandsTopic(Self.source1)])

        // AccessoryControl, as hub-1: its requests are answered on the hub's own response topics
        // (audio/hubs/hub-1/responses/<token>), and it announces the hub with a retained status.
        var mqtt = MQTTConfiguration(clientID: "hub-1-control")
        secure.configure(&mqtt, as: Self.hub1)
        let hub = try AccessoryHub(hubID: HubID(Self.hub1)!, mqtt: mqtt, logger: Logger(label: "hub-1"))
        try await Self.stoppingAtTheEnd(hub) {
            try await hub.start()
            let accessory = try await hub.pair(
                AccessoryID("headphones")!, name: "Studio", model: "S", hardwareCapabilities: .all)
            try await AccessoryControlDevice.register(accessory, .all)
            var configuration = try AccessoryControlDevice.current(for: accessory).configuration
            configuration.devicePlacement = .onHead
            configuration.primaryAudioSourceDeviceIdentifier = Self.source1.data
            try await AccessoryControlDevice.current(for: accessory).update(configuration)
            #expect(try AccessoryControlDevice.current(for: accessory).configuration == configuration)
        }

        // The same hub on its result topic.
        let results = try await Client(Self.hub1, on: secure, subscribe: ["audio/hubs/hub-1/accessories/+/result"])
        let placed = try await results.request(.placement(.inEar), accessory: "headphones")
        #expect(placed.error == .none, "\(placed.message)")
        #expect(placed.state.configuration.devicePlacement == .inEar)

        // The phone starts media: the bridge routes it to the headphones.
        try device.report(.media)
        let commands = try await device.waitForCommands(1, for: Self.source1)
        #expect(commands.map(\.action) == [.routeToAccessory])
        #expect(commands.first?.accessoryID == "headphones")

        // Home automation reads the state (retained by the bridge) and the hub's statuses: online, then offline
        // when AccessoryControl stopped.
        let state = try await observer.waitForState(of: "headphones") { $0.routedSource == Self.source1.data }
        #expect(state.registration == .registered)
        #expect(state.configuration.devicePlacement == .inEar)
        let statuses = try await observer.waitFor(2, on: "audio/hubs/hub-1/status").map {
            try observer.codec.decode(Audioaccessory_V1_HubStatus.self, from: $0.payload, format: .protobuf).online
        }
        #expect(statuses == [true, false])

        for client in [observer, device, results] { await client.close() }
        try await bridge.stop()
    }

    // MARK: - (2) A hub speaks only for itself

    @Test func aHubCannotSpeakForAnotherHubNorCommandADevice() async throws {
        let secure = try await SecureBroker()
        let bridge = try await Self.startBridge(on: secure)
        let observer = try await Client(
            Self.homeAutomation, on: secure, subscribe: ["audio/accessories/+/state", "audio/hubs/+/status"])
        let device = try await Client(Self.source1.topicID, on: secure, subscribe: [Self.commandsTopic(Self.source1)])
        // hub-1 also asks for everything of hub-2's: the subscription is granted, and nothing comes through it.
        let hub1 = try await Client(
            Self.hub1, on: secure, subscribe: ["audio/hubs/hub-1/accessories/+/result", "audio/hubs/hub-2/#"])
        // hub-2 also reads the bridge's layout, as a hub that is not told the slot count does.
        let hub2 = try await Client(
            Self.hub2, on: secure, subscribe: ["audio/hubs/hub-2/accessories/+/result", "audio/bridge/layout"])
        _ = try await hub2.waitFor(1, on: "audio/bridge/layout")

        #expect(try await hub2.request(.paired(name: "Speaker", model: "", hardwareCapabilities: .all), accessory: "speaker").error == .none)
        try await hub1.setUp("earbuds", primary: Self.source1)

        // hub-1 as hub-2: unpairs hub-2's speaker, pairs an accessory of its own under hub-2's name, says hub-2 is
        // offline (which would mark the speaker stale). And it tells the phone to pause.
        try hub1.sendTelemetry(.unpaired, hub: Self.hub2, accessory: "speaker")
        try hub1.sendTelemetry(.paired(name: "Stolen", model: "", hardwareCapabilities: .all), hub: Self.hub2, accessory: "stolen")
        try hub1.publish("audio/hubs/hub-2/status", Self.hubStatus(online: false), retain: true)
        try hub1.publish(Self.commandsTopic(Self.source1), Array(#"{"action": "ACTION_PAUSE"}"#.utf8))
        // And it lays out every hub anew: a layout of 12 slots would move every hub that follows it.
        try hub1.publish("audio/bridge/layout", Array(#"{"slots": 12}"#.utf8), retain: true)

        // mosquitto handles hub-1's packets in order, and the bridge its messages: once hub-1 has the answer to this,
        // the bridge has handled whatever of the above reached it.
        #expect(try await hub1.request(.placement(.onHead), accessory: "earbuds").error == .none)
        // hub-2 carries on: its speaker is still paired (registering an unpaired accessory would fail), and the
        // results it gets are the answers to its own requests only.
        let registered = try await hub2.request(.register(.all), accessory: "speaker")
        #expect(registered.error == .none, "\(registered.message)")
        #expect(hub2.messages(on: "audio/hubs/hub-2/accessories/speaker/result").count == 2)
        #expect(hub2.messages(on: "audio/hubs/hub-2/accessories/stolen/result").isEmpty)
        let layouts = try hub2.messages(on: "audio/bridge/layout").map {
            try Self.codec.decode(BridgeLayout.self, from: $0.payload, format: .protobuf)
        }
        #expect(layouts.count == 1 && layouts.allSatisfy { $0.slots == nil }, "the bridge's only")
        // The bridge publishes states in order: the speaker's registration comes after anything caused above.
        let speaker = try await observer.waitForState(of: "speaker") { $0.registration == .registered }
        #expect(!speaker.stale)
        #expect(try observer.states(of: "speaker").allSatisfy { !$0.stale })
        #expect(observer.messages(on: Self.stateTopic("stolen")).isEmpty)
        #expect(observer.messages(on: "audio/hubs/hub-2/status").isEmpty)
        // hub-2's results went out before the answer to this one, on hub-1's connection too if it could read them.
        #expect(try await hub1.request(.placement(.inEar), accessory: "earbuds").error == .none)
        #expect(hub1.allMessages().allSatisfy { $0.topic.hasPrefix("audio/hubs/hub-1/") }, "nothing of hub-2's")

        // The phone starts media: the bridge's ROUTE is the first and only command it gets.
        try device.report(.media)
        let commands = try await device.waitForCommands(1, for: Self.source1)
        #expect(commands.map(\.action) == [.routeToAccessory])
        #expect(device.messages(on: Self.commandsTopic(Self.source1)).count == 1)

        for client in [observer, device, hub1, hub2] { await client.close() }
        try await bridge.stop()
    }

    // MARK: - (3) A device reads only its own commands

    @Test func aDeviceReadsOnlyItsOwnCommands() async throws {
        let secure = try await SecureBroker()
        let bridge = try await Self.startBridge(on: secure)
        let hub = try await Client(Self.hub1, on: secure, subscribe: ["audio/hubs/hub-1/accessories/+/result"])
        let observer = try await Client(Self.homeAutomation, on: secure, subscribe: ["audio/sources/+/state"])
        // Device 1 asks for everything, and for device 2's commands by name: both subscriptions are granted.
        let device1 = try await Client(
            Self.source1.topicID, on: secure, subscribe: ["audio/#", Self.commandsTopic(Self.source2)])
        let device2 = try await Client(Self.source2.topicID, on: secure, subscribe: [Self.commandsTopic(Self.source2)])
        try await hub.setUp("headphones", primary: Self.source2)
        try await hub.setUp("earbuds", primary: Self.source1)

        // Device 1 cannot speak for device 2 either: a call, in device 2's name.
        try device1.publish(
            Topic.sourceState(source: Self.source2).name(under: .default), Self.sourceState(.call), retain: true)
        try await device1.sync()
        try device2.report(.media)
        let stateTopic2 = Topic.sourceState(source: Self.source2).name(under: .default)
        _ = try await observer.waitForAll(1) { message in
            message.topic == stateTopic2
                && (try? observer.codec.decode(Audioaccessory_V1_SourceState.self, from: message.payload, format: .protobuf))?
                    .activity == .media
        }
        #expect(observer.messages(on: stateTopic2).count == 1, "device 2's own report, and not device 1's before it")

        // Device 2 gets its ROUTE; then device 1 gets its own, through "audio/#", after device 2's went by.
        #expect(try await device2.waitForCommands(1, for: Self.source2).map(\.action) == [.routeToAccessory])
        try device1.report(.media)
        let own = try await device1.waitForCommands(1, for: Self.source1)
        #expect(own.map(\.accessoryID) == ["earbuds"])
        #expect(device1.messages(on: Self.commandsTopic(Self.source2)).isEmpty)
        // Besides, the news of its own head-tracking session (the earbuds track heads): none of device 2's.
        #expect(
            device1.allMessages().map(\.topic).filter { $0 != Self.hostNewsTopic(Self.source1) }
                == [Self.commandsTopic(Self.source1)], "nothing else of audio/#")

        for client in [hub, observer, device1, device2] { await client.close() }
        try await bridge.stop()
    }

    // MARK: - (4) Home automation reads states and statuses, and writes none of them

    @Test func homeAutomationReadsStatesAndStatusesOnly() async throws {
        let secure = try await SecureBroker()
        let bridge = try await Self.startBridge(on: secure)
        let hub = try await Client(Self.hub1, on: secure, subscribe: ["audio/hubs/hub-1/accessories/+/result"])
        let device = try await Client(Self.source1.topicID, on: secure, subscribe: [Self.commandsTopic(Self.source1)])
        try hub.publish("audio/hubs/hub-1/status", Self.hubStatus(online: true), retain: true)
        try await hub.setUp("headphones", primary: Self.source1)
        try device.report(.media)
        _ = try await device.waitForCommands(1, for: Self.source1)

        // Everything it may read, retained: the bridge's and the hub's statuses, the accessory's and the device's
        // states.
        let automation = try await Client(Self.homeAutomation, on: secure, subscribe: ["audio/#"])
        let retained = [
            "audio/bridge/status", "audio/bridge/layout", "audio/hubs/hub-1/status", Self.stateTopic("headphones"),
            Topic.sourceState(source: Self.source1).name(under: .default),
        ]
        for topic in retained { _ = try await automation.waitFor(1, on: topic) }

        // It may write nothing: not telemetry, not a state, not a command.
        try automation.publish(
            "audio/hubs/hub-1/accessories/forged/telemetry",
            Self.codec.encode(
                Audioaccessory_V1_AccessoryTelemetry(.paired(name: "Forged", model: "", hardwareCapabilities: .all)),
                as: .protobuf))
        let forgedState = Array(#"{"accessoryId": "headphones", "name": "Forged"}"#.utf8)
        try automation.publish(Self.stateTopic("headphones"), forgedState, retain: true)
        try automation.publish(Self.commandsTopic(Self.source1), Array(#"{"action": "ACTION_PAUSE"}"#.utf8))
        try await automation.sync()

        // The headphones come off: a result for the hub, a PAUSE for the phone, a new state for everyone.
        #expect(try await hub.request(.placement(.offHead), accessory: "headphones").error == .none)
        #expect(try await device.waitForCommands(2, for: Self.source1).map(\.action) == [.routeToAccessory, .pause])
        // Then one more state, which the bridge publishes after everything above.
        #expect(try await hub.request(.paired(name: "Marker", model: "", hardwareCapabilities: .all), accessory: "marker").error == .none)
        _ = try await automation.waitForState(of: "marker") { _ in true }

        // Besides those, only what the bridge writes for home automation (its JSON views, events, availability).
        let readable = Set(retained + [Self.stateTopic("marker")])
        let topics = automation.allMessages().map(\.topic)
        #expect(
            topics.allSatisfy { topic in
                readable.contains(topic) || Self.homeAutomationTopics.contains { Self.topic(topic, matches: $0) }
            }, "\(topics)")
        let states = automation.messages(on: Self.stateTopic("headphones"))
        #expect(!states.contains { $0.payload == forgedState }, "it never got back the state it tried to write")
        let last = try automation.codec.decode(
            Audioaccessory_V1_AccessoryState.self, from: try #require(states.last).payload, format: .protobuf)
        #expect(last.configuration.devicePlacement == .offHead)
        #expect(hub.messages(on: "audio/hubs/hub-1/accessories/forged/result").isEmpty)
        #expect(device.messages(on: Self.commandsTopic(Self.source1)).count == 2)

        for client in [hub, device, automation] { await client.close() }
        try await bridge.stop()
    }

    // MARK: - (6) Home automation and Home Assistant: the ACL alone

    // These tests need no bridge: each role is a client logged in as its user, and what arrives where is the ACL's
    // doing. A check that something does NOT arrive first waits for a message the same sender published after it.

    /// What home automation reads besides states and statuses: the bridge writes them for it, and Home Assistant's
    /// discovery (deploy/mosquitto/acl, "Home automation").
    static let homeAutomationTopics = [
        "audio/accessories/+/view", "audio/accessories/+/events", "audio/accessories/+/controls/result",
        "audio/bridge/view", "audio/bridge/availability", "audio/hubs/+/availability", "homeassistant/#",
    ]

    static let marker = Array("marker".utf8)

    @Test func homeAutomationWritesItsControlsAndNothingElse() async throws {
        let secure = try await SecureBroker()
        // Every role reads all it may.
        let everything = ["audio/#", "homeassistant/#"]
        let bridge = try await Client(Self.bridgeUser, on: secure, subscribe: everything)
        let watcher = try await Client(Self.homeAutomation, on: secure, subscribe: everything)
        let hub = try await Client(Self.hub1, on: secure, subscribe: everything)
        let device = try await Client(Self.source1.topicID, on: secure, subscribe: everything)
        let automation = try await Client(Self.homeAutomation, on: secure)

        // What it may not write, retained so that a newcomer would find it too: what the bridge writes for home
        // automation, discovery (of the bridge's devices or any other), and the rest of the contract.
        let forged = Array(#"{"forged": true}"#.utf8)
        let denied = [
            "audio/accessories/headphones/view", "audio/accessories/headphones/events",
            "audio/accessories/headphones/controls/result", "audio/accessories/headphones/state",
            "audio/bridge/view", "audio/bridge/availability", "audio/bridge/status", "audio/bridge/rebuild/x",
            "audio/hubs/hub-1/availability", "audio/hubs/hub-1/status", "audio/hubs/hub-1/rebirth",
            "audio/hubs/hub-1/accessories/headphones/telemetry", "audio/hubs/hub-1/accessories/headphones/result",
            "audio/hubs/hub-1/responses/x", Topic.sourceState(source: Self.source1).name(under: .default),
            Self.commandsTopic(Self.source1), "homeassistant/device/forged/config", "homeassistant/sensor/forged/config",
            "homeassistant/status/x",
        ]
        for topic in denied { try automation.publish(topic, forged, retain: true) }
        // What it may: an accessory's controls, in JSON and in protobuf (switching = SWITCHING_OFF: field 2, value
        // 2), and Home Assistant's birth message.
        let controls = "audio/accessories/headphones/controls"
        let json = Array(#"{"switching": "SWITCHING_OFF", "pinnedSource": "12:34:56:78:9A:BC"}"#.utf8)
        let protobuf: [UInt8] = [0x10, 0x02]
        try automation.publish(controls, json, properties: MQTTProperties(contentType: "application/json"))
        try automation.publish(controls, protobuf, properties: MQTTProperties(contentType: "application/protobuf"))
        try automation.publish("homeassistant/status", Array("online".utf8))
        try await automation.sync()
        // The hub and the device read nothing of home automation's: the bridge sends each a message, after.
        try bridge.publish("audio/hubs/hub-1/rebirth", Self.marker)
        try bridge.publish(Self.commandsTopic(Self.source1), Self.marker)

        // The bridge gets the controls and the birth message, and nothing before them.
        let received = try await bridge.waitForAll(3, where: { _ in true })
        #expect(received.map(\.topic) == [controls, controls, "homeassistant/status"])
        #expect(received.map(\.payload) == [json, protobuf, Array("online".utf8)])
        #expect(received.first?.properties.contentType == "application/json")
        // Home automation reads its own birth message, and neither its forgeries nor the controls it wrote.
        _ = try await watcher.waitFor(1, on: "homeassistant/status")
        #expect(watcher.allMessages().map(\.topic) == ["homeassistant/status"])
        _ = try await hub.waitFor(1, on: "audio/hubs/hub-1/rebirth")
        #expect(hub.allMessages().map(\.topic) == ["audio/hubs/hub-1/rebirth"])
        _ = try await device.waitFor(1, on: Self.commandsTopic(Self.source1))
        #expect(device.allMessages().map(\.topic) == [Self.commandsTopic(Self.source1)])

        // Nothing was retained: newcomers find nothing before the next birth message.
        let lateBridge = try await Client(Self.bridgeUser, on: secure, subscribe: everything)
        let lateWatcher = try await Client(Self.homeAutomation, on: secure, subscribe: everything)
        try automation.publish("homeassistant/status", Array("online".utf8))
        for late in [lateBridge, lateWatcher] {
            _ = try await late.waitFor(1, on: "homeassistant/status")
            #expect(late.allMessages().map(\.topic) == ["homeassistant/status"], "\(late.user)")
        }
        // The bridge, subscribed all along, got that one too, and still nothing else.
        _ = try await bridge.waitFor(2, on: "homeassistant/status")
        #expect(bridge.allMessages().map(\.topic) == [controls, controls, "homeassistant/status", "homeassistant/status"])

        for client in [bridge, watcher, hub, device, automation, lateBridge, lateWatcher] { await client.close() }
    }

    @Test func theBridgeWritesWhatHomeAutomationReads() async throws {
        let secure = try await SecureBroker()
        let everything = ["audio/#", "homeassistant/#"]
        let watcher = try await Client(Self.homeAutomation, on: secure, subscribe: everything)
        let hub = try await Client(Self.hub1, on: secure, subscribe: everything)
        let device = try await Client(Self.source1.topicID, on: secure, subscribe: everything)
        let bridge = try await Client(Self.bridgeUser, on: secure)

        let written: [(topic: String, payload: String, retain: Bool)] = [
            ("audio/accessories/headphones/view", #"{"worn": true, "placement": "onHead"}"#, true),
            ("audio/accessories/headphones/events", #"{"action": "ACTION_PAUSE", "reason": "REASON_TAKEN_OFF"}"#, false),
            ("audio/accessories/headphones/controls/result", #"{"error": "ERROR_CODE_NONE"}"#, false),
            ("audio/bridge/availability", "online", true),
            ("audio/hubs/hub-1/availability", "online", true),
            ("audio/bridge/view", #"{"version": "0.1.0", "accessories": 1}"#, true),
            ("homeassistant/device/accessory_bridge_headphones/config", #"{"dev": {"ids": ["headphones"]}}"#, true),
        ]
        #expect(written.allSatisfy { message in Self.homeAutomationTopics.contains { Self.topic(message.topic, matches: $0) } })
        for message in written { try bridge.publish(message.topic, Array(message.payload.utf8), retain: message.retain) }
        // Then one message each for the hub and the device: it reaches them after anything above would have.
        try bridge.publish("audio/hubs/hub-1/rebirth", Self.marker)
        try bridge.publish(Self.commandsTopic(Self.source1), Self.marker)

        // Home automation reads them all, in order.
        let received = try await watcher.waitForAll(written.count, where: { _ in true })
        #expect(received.map(\.topic) == written.map(\.topic))
        #expect(received.map { String(decoding: $0.payload, as: UTF8.self) } == written.map(\.payload))
        // A hub and a device read none of them.
        _ = try await hub.waitFor(1, on: "audio/hubs/hub-1/rebirth")
        #expect(hub.allMessages().map(\.topic) == ["audio/hubs/hub-1/rebirth"])
        _ = try await device.waitFor(1, on: Self.commandsTopic(Self.source1))
        #expect(device.allMessages().map(\.topic) == [Self.commandsTopic(Self.source1)])

        // A Home Assistant that starts later finds the retained ones, then announces itself: the bridge reads its
        // birth message, and reads back its own retained discovery (as it does at start-up to clear stale configs).
        let late = try await Client(Self.homeAutomation, on: secure, subscribe: everything)
        let bridgeReader = try await Client(Self.bridgeUser, on: secure, subscribe: ["homeassistant/#"])
        try late.publish("homeassistant/status", Array("online".utf8))
        let lateMessages = try await late.waitFor(1, on: "homeassistant/status")
        #expect(lateMessages.count == 1)
        let retained = late.allMessages().dropLast()
        #expect(Set(retained.map(\.topic)) == Set(written.filter(\.retain).map(\.topic)))
        #expect(retained.count == written.filter(\.retain).count)
        _ = try await bridgeReader.waitFor(1, on: "homeassistant/status")
        #expect(
            bridgeReader.allMessages().map(\.topic)
                == ["homeassistant/device/accessory_bridge_headphones/config", "homeassistant/status"])

        // The bridge's receiving session ("<client-id>"), as a process that dies: its will, a retained "offline" on
        // the availability, is published.
        let password = try #require(secure.passwords[Self.bridgeUser])
        let availability = try await secure.broker.startSubscriber(
            topic: "homeassistant/status", count: 1, timeout: .seconds(60), clientID: "accessory-bridge",
            arguments: [
                "--cafile", secure.certificates.path + "/ca.crt", "-u", Self.bridgeUser, "-P", password,
                "--will-topic", "audio/bridge/availability", "--will-payload", "offline", "--will-retain",
                "--will-qos", "1",
            ])
        availability.kill()
        let states = try await watcher.waitFor(2, on: "audio/bridge/availability")
        #expect(states.map { String(decoding: $0.payload, as: UTF8.self) } == ["online", "offline"])

        for client in [watcher, hub, device, bridge, late, bridgeReader] { await client.close() }
    }

    @Test func hubsAndDevicesWriteNoneOfHomeAutomationsTopics() async throws {
        let secure = try await SecureBroker()
        let everything = ["audio/#", "homeassistant/#"]
        let watcher = try await Client(Self.homeAutomation, on: secure, subscribe: everything)
        let bridge = try await Client(Self.bridgeUser, on: secure, subscribe: everything)
        let hub = try await Client(Self.hub1, on: secure)
        let device = try await Client(Self.source1.topicID, on: secure)

        // A device's user name is also a valid hub id: it may not say that "hub" is available either.
        let topics = [
            "audio/accessories/headphones/view", "audio/accessories/headphones/events",
            "audio/accessories/headphones/controls", "audio/accessories/headphones/controls/result",
            "audio/bridge/view", "audio/bridge/availability", "audio/hubs/hub-1/availability",
            "audio/hubs/\(Self.source1.topicID)/availability", "homeassistant/status",
            "homeassistant/device/forged/config",
        ]
        let forged = Array(#"{"forged": true}"#.utf8)
        for client in [hub, device] {
            for topic in topics { try client.publish(topic, forged, retain: true) }
        }
        // Then each says what both readers may read: the hub its status, the device its state.
        try hub.publish("audio/hubs/hub-1/status", Self.hubStatus(online: true), retain: true)
        try device.report(.media)
        let expected: Set = ["audio/hubs/hub-1/status", Topic.sourceState(source: Self.source1).name(under: .default)]
        for reader in [watcher, bridge] {
            for topic in expected { _ = try await reader.waitFor(1, on: topic) }
            #expect(reader.allMessages().count == 2, "\(reader.user): \(reader.allMessages().map(\.topic))")
            #expect(Set(reader.allMessages().map(\.topic)) == expected)
        }

        for client in [watcher, bridge, hub, device] { await client.close() }
    }

    // MARK: - (5) No anonymous clients, no wrong passwords

    @Test(arguments: [Access.roles, .aclFile])
    func anonymousClientsAndWrongPasswordsAreRefused(access: Access) async throws {
        let secure = try await SecureBroker(access: access)
        let attempts: [(user: String?, password: String?)] = [
            (nil, nil),  // anonymous
            (Self.hub1, "wrong"),
            (Self.hub1, secure.passwords[Self.hub2]),  // another user's password
            (Self.bridgeUser, secure.passwords[Self.homeAutomation]),
            ("nobody", "nothing"),  // not in the password file
        ]
        for attempt in attempts {
            let refusal = try await Self.refusal(on: secure, user: attempt.user, password: attempt.password)
            #expect(refusal.kind == .connectionRefused, "\(attempt.user ?? "anonymous"): \(refusal)")
            // mosquitto 2.0 answers 0x87 (not authorized) or 0x86 (bad user name or password).
            #expect(refusal.code == 0x86 || refusal.code == 0x87, "\(refusal)")
        }
        // Over the same TLS listener, the right password gets in: the refusals were about the credentials.
        let hub = try await Client(Self.hub1, on: secure)
        #expect(hub.mqtt.isConnected)
        await hub.close()
    }

    // MARK: - (7) Head tracking: head motion is personal data

    // The bridge writes the news of sessions to hubs and hosts; a hub reads its own accessories' news and writes frames
    // as itself only; a device reads its own news and frames only. As in (6), these need no bridge: each role is a
    // client logged in as its user, and a check that something does NOT arrive first waits for a message the same
    // sender published after it.

    static func framesTopic(_ host: BluetoothAddress, hub: String, accessory: String = "headphones") -> String {
        "audio/sources/\(host.topicID)/frames/\(hub)/\(accessory)"
    }

    static func hostNewsTopic(_ host: BluetoothAddress) -> String {
        Topic.hostHeadTracking(host: host).name(under: .default)
    }

    static func hubNewsTopic(_ hub: String, accessory: String = "headphones") -> String {
        "audio/hubs/\(hub)/accessories/\(accessory)/headtracking"
    }

    @Test(arguments: [Access.roles, .aclFile])
    func aDeviceCannotReadAnotherDevicesFramesNorNews(access: Access) async throws {
        let secure = try await SecureBroker(access: access)
        let bridge = try await Client(Self.bridgeUser, on: secure)
        let hub = try await Client(Self.hub1, on: secure)
        // Device 1 asks for everything, and for device 2's frames and news by name: the subscriptions are granted.
        let device1 = try await Client(
            Self.source1.topicID, on: secure,
            subscribe: ["audio/#", "audio/sources/\(Self.source2.topicID)/frames/#", Self.hostNewsTopic(Self.source2)])
        let device2 = try await Client(
            Self.source2.topicID, on: secure,
            subscribe: ["audio/sources/\(Self.source2.topicID)/frames/#", Self.hostNewsTopic(Self.source2)])

        // Device 2's session: its news from the bridge, a frame from its hub. Then device 1's own, after them.
        try bridge.publish(Self.hostNewsTopic(Self.source2), Self.marker)
        try hub.publish(Self.framesTopic(Self.source2, hub: Self.hub1), Self.marker)
        try bridge.publish(Self.hostNewsTopic(Self.source1), Self.marker)
        try hub.publish(Self.framesTopic(Self.source1, hub: Self.hub1), Self.marker)

        let own = [Self.hostNewsTopic(Self.source1), Self.framesTopic(Self.source1, hub: Self.hub1)]
        for topic in own { _ = try await device1.waitFor(1, on: topic) }
        #expect(device1.allMessages().count == 2, "\(device1.allMessages().map(\.topic))")
        #expect(Set(device1.allMessages().map(\.topic)) == Set(own))
        // Device 2 got its own: what device 1 did not get was published.
        _ = try await device2.waitFor(1, on: Self.hostNewsTopic(Self.source2))
        _ = try await device2.waitFor(1, on: Self.framesTopic(Self.source2, hub: Self.hub1))

        for client in [bridge, hub, device1, device2] { await client.close() }
    }

    @Test(arguments: [Access.roles, .aclFile])
    func aHubCannotPublishFramesAsAnotherHubNorNews(access: Access) async throws {
        let secure = try await SecureBroker(access: access)
        let observer = try await Client(secure.observer, on: secure, subscribe: ["audio/#"])
        let device = try await Client(
            Self.source1.topicID, on: secure, subscribe: ["audio/sources/\(Self.source1.topicID)/#"])
        let hub = try await Client(Self.hub1, on: secure)
        let otherDevice = try await Client(Self.source2.topicID, on: secure)

        // hub-1 as hub-2 (a frame the device would take as hub-2's), and as the bridge (news of sessions); device 2
        // as hub-1 (a device sends no frames).
        try hub.publish(Self.framesTopic(Self.source1, hub: Self.hub2), Self.marker)
        try hub.publish(Self.hostNewsTopic(Self.source1), Self.marker)
        try hub.publish(Self.hubNewsTopic(Self.hub1), Self.marker)
        try hub.publish(Self.hubNewsTopic(Self.hub2), Self.marker)
        try otherDevice.publish(Self.framesTopic(Self.source1, hub: Self.hub1), Self.marker)
        try await otherDevice.sync()
        // Then a frame as itself: the only message of all these the broker takes.
        let own = Self.framesTopic(Self.source1, hub: Self.hub1)
        try hub.publish(own, Self.marker)

        _ = try await device.waitFor(1, on: own)
        #expect(device.allMessages().map(\.topic) == [own])
        _ = try await observer.waitFor(1, on: own)
        #expect(observer.allMessages().map(\.topic) == [own])

        for client in [observer, device, hub, otherDevice] { await client.close() }
    }

    @Test(arguments: [Access.roles, .aclFile])
    func aHubCannotReadAnotherHubsHeadTrackingNews(access: Access) async throws {
        let secure = try await SecureBroker(access: access)
        let bridge = try await Client(Self.bridgeUser, on: secure)
        // hub-1 asks for everything, and for hub-2's news by name (in every slot too).
        let hub1 = try await Client(
            Self.hub1, on: secure,
            subscribe: ["audio/#", "audio/hubs/hub-2/accessories/+/headtracking", "audio/slots/+/hubs/hub-2/#"])
        let hub2 = try await Client(
            Self.hub2, on: secure,
            subscribe: ["audio/hubs/hub-2/accessories/+/headtracking", "audio/slots/+/hubs/hub-2/accessories/+/headtracking"])
        let device = try await Client(Self.source1.topicID, on: secure, subscribe: ["audio/#"])

        // The ACL file is written for one bridge; the roles cover a cluster's slots as well.
        var theirs = [Self.hubNewsTopic(Self.hub2, accessory: "speaker")]
        if access == .roles { theirs.append("audio/slots/3/hubs/hub-2/accessories/speaker/headtracking") }
        for topic in theirs { try bridge.publish(topic, Self.marker) }
        let own = Self.hubNewsTopic(Self.hub1)
        try bridge.publish(own, Self.marker)
        try bridge.publish(Self.hostNewsTopic(Self.source1), Self.marker)

        _ = try await hub1.waitFor(1, on: own)
        #expect(hub1.allMessages().map(\.topic) == [own])
        for topic in theirs { _ = try await hub2.waitFor(1, on: topic) }
        // A device reads no hub's news either: only the news of the sessions it hosts.
        _ = try await device.waitFor(1, on: Self.hostNewsTopic(Self.source1))
        #expect(device.allMessages().map(\.topic) == [Self.hostNewsTopic(Self.source1)])

        for client in [bridge, hub1, hub2, device] { await client.close() }
    }

    /// The real flow with the roles: the bridge's news reaches the hub (AccessoryHub) and the host (HeadTrackingHost),
    /// and the hub's frames reach the host.
    @Test func headTrackingWorksWithTheRoles() async throws {
        let secure = try await SecureBroker()
        let bridge = try await Self.startBridge(on: secure)
        var hostMQTT = MQTTConfiguration(clientID: "host-\(UUID().uuidString.prefix(8))")
        secure.configure(&hostMQTT, as: Self.source1.topicID)
        var logger = Logger(label: "head-tracking")
        logger.logLevel = .warning
        let host = try HeadTrackingHost(address: Self.source1, mqtt: hostMQTT, logger: logger)
        var hubMQTT = MQTTConfiguration(clientID: "hub-1-\(UUID().uuidString.prefix(8))")
        secure.configure(&hubMQTT, as: Self.hub1)
        let hub = try AccessoryHub(hubID: HubID(Self.hub1)!, mqtt: hubMQTT, logger: logger)
        try await Self.stoppingAtTheEnd(hub) {
            try await host.start(timeout: .seconds(20))
            try await hub.start(timeout: .seconds(20))
            let news = NewsLog(host)
            try host.report(.media, headTracking: true)
            let accessory = try await hub.pair(
                AccessoryID("headphones")!, name: "Studio", model: "S", hardwareCapabilities: .all)
            try await AccessoryControlDevice.register(accessory, .all)
            let sessions = SessionLog()
            let feature = AudioAccessoryHeadTracking(for: accessory) { SessionLog.Handler(log: sessions) }
            let frames = FrameCollector(host.sensorUpdates(for: accessory.id))
            try await hub.report(primary: Self.source1, secondary: nil, for: accessory)
            try await hub.report(placement: .onHead, for: accessory)
            let session = try await sessions.waitForActivation()
            #expect(session.isHeadTrackingActive)
            #expect(try await news.waitFor(1).first?.event.kind == .activated)
            try session.sendDataToAudioExtension(Data(repeating: 1, count: 13))
            try await frames.waitFor(1)
            #expect(frames.all.first?.data == Data(repeating: 1, count: 13) && frames.all.first?.hub == HubID(Self.hub1))
            feature.invalidate()
        }
        await host.stop()
        try await bridge.stop()
    }

    // MARK: - Roles close what patterns leave open

    /// A device's user name (its address) is also a valid hub id, and a hub's user name could be anything: with roles,
    /// each has its own topics and no other's. The observer reads everything, so a message the broker took would reach
    /// it, and before the marker each sender publishes last on a topic of its own.
    @Test func aDeviceCannotSpeakAsAHubNorAHubAsADevice() async throws {
        let secure = try await SecureBroker()
        let observer = try await Client(secure.observer, on: secure, subscribe: ["audio/#"])
        let device = try await Client(Self.source1.topicID, on: secure)
        let hub = try await Client(Self.hub1, on: secure)
        let asHub = "audio/hubs/\(Self.source1.topicID)"
        let forged = Self.codec.encode(
            Audioaccessory_V1_AccessoryTelemetry(.paired(name: "Squatter", model: "", hardwareCapabilities: .all)),
            as: .protobuf)
        // The device as the hub of its address: telemetry (pairing an id other hubs will need) and a status.
        try device.publish("\(asHub)/accessories/squatted/telemetry", forged)
        try device.publish("\(asHub)/status", Self.hubStatus(online: true), retain: true)
        try device.report(.media)
        // The hub as a device: its state, and another hub's telemetry.
        try hub.publish(Topic.sourceState(source: Self.source2).name(under: .default), Self.sourceState(.call), retain: true)
        try hub.publish("audio/hubs/hub-2/accessories/squatted/telemetry", forged)
        try hub.publish("audio/hubs/hub-1/status", Self.hubStatus(online: true), retain: true)

        let deviceState = Topic.sourceState(source: Self.source1).name(under: .default)
        _ = try await observer.waitFor(1, on: deviceState)
        _ = try await observer.waitFor(1, on: "audio/hubs/hub-1/status")
        #expect(Set(observer.allMessages().map(\.topic)) == [deviceState, "audio/hubs/hub-1/status"],
            "\(observer.allMessages().map(\.topic))")
        for client in [observer, device, hub] { await client.close() }
    }

    /// The ACL file's limit, as its comments and docs/security.md say: a pattern gives a device's user name the rights of
    /// the hub of that id as well. (The roles above close it.)
    @Test func theACLFileLetsADeviceSpeakAsTheHubOfItsAddress() async throws {
        let secure = try await SecureBroker(access: .aclFile)
        let observer = try await Client(secure.observer, on: secure, subscribe: ["audio/#"])
        let device = try await Client(Self.source1.topicID, on: secure)
        try device.publish("audio/hubs/\(Self.source1.topicID)/status", Self.hubStatus(online: true), retain: true)
        _ = try await observer.waitFor(1, on: "audio/hubs/\(Self.source1.topicID)/status")
        for client in [observer, device] { await client.close() }
    }

    /// TLS only: a client that does not speak TLS to the listener gets nowhere (the broker hears no handshake).
    @Test func theBrokerSpeaksTLSOnly() async throws {
        let secure = try await SecureBroker()
        var mqtt = MQTTConfiguration(clientID: "plain-\(UUID().uuidString.prefix(8))")
        secure.configure(&mqtt, as: Self.hub1)
        mqtt.tls = nil
        let offset = secure.broker.logLength
        let client = try MQTTClient(configuration: mqtt, logger: Logger(label: "plain"))
        try client.start(onEvent: { _ in }, onMessage: { _ in })
        try await secure.broker.waitForLog("wrong version number", after: offset)
        let error = await #expect(throws: MQTTError.self) { try await client.waitUntilConnected(timeout: .seconds(1)) }
        #expect(error?.kind == .notConnected)
        await client.close()
    }

    /// `accessoryctl roles` while the broker runs: a hub added (its password on standard input) connects and works at
    /// once; a device added gets a password made for it, printed once; removed, the hub is cut off and refused. The
    /// admin's password comes from the environment: no password is ever on a command line.
    @Test func theRolesToolChangesUsersWhileTheBrokerRuns() async throws {
        let secure = try await SecureBroker()
        let observer = try await Client(secure.observer, on: secure, subscribe: ["audio/#"])
        func accessoryctl(_ arguments: [String], input: String? = nil) async throws -> (Int32, String) {
            let log = secure.broker.directory.appendingPathComponent("roles-\(UUID().uuidString.prefix(8)).log")
            let process = try ChildProcess(
                executable: try BuiltProducts.path("accessoryctl"),
                arguments: ["roles"] + arguments + [
                    "--broker", "mqtts://localhost:\(secure.broker.port)", "--ca-file", secure.certificates.path + "/ca.crt",
                    "--username", secure.observer,
                ],
                environment: ["ACCESSORYCTL_PASSWORD": secure.passwords[secure.observer]!], input: input,
                outputPath: log.path)
            let status = try await process.exit()
            return (status, (try? String(contentsOf: log, encoding: .utf8)) ?? "")
        }
        var (status, output) = try await accessoryctl(["add-hub", "hub-9", "--password-stdin"], input: "nine-secret\n")
        #expect(status == 0 && output == "added hub-9 with role hub:hub-9\n", "\(output)")
        (status, output) = try await accessoryctl(["add-device", "AA:BB:CC:DD:EE:09"])
        let printed = output.split(separator: "\n").last?.split(separator: " ") ?? []
        #expect(status == 0 && printed.count == 2 && printed.first == "aabbccddee09", "\(output)")
        // Adding a user twice is refused, with the plugin's reason.
        (status, output) = try await accessoryctl(["add-hub", "hub-9", "--password-stdin"], input: "again\n")
        #expect(status == 1 && output.contains("Client already exists"), "\(output)")

        var passwords = secure.passwords
        passwords["hub-9"] = "nine-secret"
        passwords["aabbccddee09"] = printed.count == 2 ? String(printed[1]) : ""
        let added = SecureBroker(copying: secure, passwords: passwords)
        let hub = try await Client("hub-9", on: added)
        let device = try await Client("aabbccddee09", on: added)
        try hub.publish("audio/hubs/hub-1/status", Self.hubStatus(online: true), retain: true)  // not its own
        try hub.publish("audio/hubs/hub-9/status", Self.hubStatus(online: true), retain: true)
        try device.publish("audio/sources/aabbccddee09/state", Self.sourceState(.media), retain: true)
        _ = try await observer.waitFor(1, on: "audio/hubs/hub-9/status")
        _ = try await observer.waitFor(1, on: "audio/sources/aabbccddee09/state")
        #expect(observer.messages(on: "audio/hubs/hub-1/status").isEmpty)

        // Removed: its connection is closed, and it is refused from then on.
        (status, output) = try await accessoryctl(["remove", "hub-9"])
        #expect(status == 0 && output == "removed hub-9\n", "\(output)")
        try await secure.broker.waitForLog("Client \(hub.clientID) ")
        let refused = try await Self.refusal(on: added, user: "hub-9", password: "nine-secret")
        #expect(refused.kind == .connectionRefused)
        for client in [observer, hub, device] { await client.close() }
    }

    // MARK: - The bridge never logs passwords or key material

    @Test func theBridgeProcessLogsNoPasswordNorKeyMaterial() async throws {
        // A client certificate too, so that the bridge has a private key to leak.
        let secure = try await SecureBroker(requireClientCertificate: true)
        let watcher = try await Client(Self.homeAutomation, on: secure, subscribe: ["audio/bridge/status"])
        let password = try #require(secure.passwords[Self.bridgeUser])
        let log = secure.broker.directory.appendingPathComponent("bridge.log")
        let certificates = secure.certificates.path
        let bridge = try ChildProcess(
            executable: try BuiltProducts.path("accessory-bridge"),
            arguments: [
                "--broker", "mqtts://localhost:\(secure.broker.port)", "--http-port", "0", "--ca-file", "\(certificates)/ca.crt",
                "--cert-file", "\(certificates)/client.crt", "--key-file", "\(certificates)/client.key",
                "--username", Self.bridgeUser, "--password", password, "--client-id", "logged-bridge",
                "--log-level", "trace",
            ],
            outputPath: log.path)
        let online = try await watcher.waitFor(1, on: "audio/bridge/status")[0]
        #expect(try watcher.codec.decode(Audioaccessory_V1_BridgeStatus.self, from: online.payload, format: .protobuf).online)
        // One request through it, so that handling a message is logged as well.
        let hub = try await Client(Self.hub1, on: secure, subscribe: ["audio/hubs/hub-1/accessories/+/result"])
        #expect(try await hub.request(.paired(name: "Studio", model: "", hardwareCapabilities: .all), accessory: "headphones").error == .none)
        bridge.signal(SIGTERM)
        #expect(try await bridge.exit() == 0)

        let text = try String(contentsOf: log, encoding: .utf8)
        // The most verbose log there is: libmosquitto's own messages are there, at debug level.
        #expect(text.split(separator: "\n").count > 10 && text.contains(" debug "), "\(text.prefix(2_000))")
        #expect(!text.contains(password), "the password is never logged")
        let key = try String(contentsOf: secure.certificates.appendingPathComponent("client.key"), encoding: .utf8)
        let keyLines = key.split(separator: "\n").filter { !$0.hasPrefix("-----") }
        #expect(keyLines.count > 10)
        #expect(!keyLines.contains { text.contains($0) }, "no line of the private key is logged")
        #expect(!text.contains("PRIVATE KEY"))
        await watcher.close()
        await hub.close()
    }

    // MARK: - The shipped configuration

    /// deploy/mosquitto as a whole: mosquitto.conf (with its file paths pointed at a temporary directory, and the
    /// test's loopback listener instead of port 8883), users made by passwords.sh, certificates by make-certs.sh.
    ///
    /// At start-up the bridge reads one retained state per accessory through one QoS 1 subscription, and mosquitto
    /// queues them all at once: with its default queue limit (1,000 beyond the 100 in flight), states beyond that
    /// would be lost, and with them the marker that ends the read. The shipped limit keeps them all.
    @Test func theShippedConfigurationKeepsEveryRetainedStateForTheBridge() async throws {
        // SecureBroker's roles broker is deploy/mosquitto/mosquitto.conf as shipped.
        let secure = try await SecureBroker()
        let anonymous = try await Self.refusal(on: secure, user: nil, password: nil)
        #expect(anonymous.kind == .connectionRefused)

        // 1,500 accessories, retained as the bridge retains them, in batches that each end with a barrier.
        let count = 1_500
        let writer = try await Client(Self.bridgeUser, on: secure)
        for batch in stride(from: 0, to: count, by: 50) {
            for index in batch..<min(batch + 50, count) {
                var state = Audioaccessory_V1_AccessoryState()
                state.accessoryID = Self.accessory(index)
                state.hubID = Self.hub1
                state.registration = .paired
                state.hardwareCapabilities = .init(Capabilities.all)
                state.updatedAtUnixMs = 1_763_790_000_000
                try writer.publish(
                    Self.stateTopic(Self.accessory(index)), Self.codec.encode(state, as: .protobuf), retain: true)
            }
            try await writer.sync()
        }
        await writer.close()

        let bridge = try await Self.startBridge(on: secure) { $0.rebuildTimeout = .seconds(10) }
        // Every one of them is known to the bridge: registering succeeds (an unknown accessory is invalidRequest).
        let hub = try await Client(Self.hub1, on: secure, subscribe: ["audio/hubs/hub-1/accessories/+/result"])
        for index in 0..<count {
            try hub.sendTelemetry(.register(.all), accessory: Self.accessory(index))
        }
        let results = try await hub.waitForAll(count, where: { $0.topic.hasSuffix("/result") }, timeout: .seconds(60))
        let failed = try results.map { try hub.codec.decode(Audioaccessory_V1_RequestResult.self, from: $0.payload, format: .protobuf) }
            .filter { $0.error != .none }
        #expect(failed.isEmpty, "\(failed.count) of \(count) unknown to the bridge, first: \(failed.first?.message ?? "")")

        await hub.close()
        try await bridge.stop()
    }

    @Test func thePasswordRecipeNamesUsersAsTheACLExpects() async throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("passwords-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: file) }
        #expect(try await Self.addUser(file, ["bridge"]).user == "bridge.audio")
        #expect(try await Self.addUser(file, ["home-automation"]).user == "home.automation")
        #expect(try await Self.addUser(file, ["hub", "kitchen_hub-2"]).user == "kitchen_hub-2")
        #expect(try await Self.addUser(file, ["source", "12:34:56:78:9A:BC"]).user == "123456789abc")
        let mode = try FileManager.default.attributesOfItem(atPath: file.path)[.posixPermissions] as? Int
        #expect(mode == 0o600)
        let names = try String(contentsOf: file, encoding: .utf8).split(separator: "\n").map { $0.prefix { $0 != ":" } }
        #expect(names == ["bridge.audio", "home.automation", "kitchen_hub-2", "123456789abc"])

        // A hub id of a device's form would make that hub the device too; a system user's form is no hub id.
        for refused in [["hub", "123456789abc"], ["hub", "home.automation"], ["hub", ""], ["source", "12:34:56"]] {
            let (status, output) = try await Self.runRecipe(file, refused)
            #expect(status == 1, "\(refused): \(output)")
        }
        #expect(try String(contentsOf: file, encoding: .utf8).split(separator: "\n").count == 4)
    }

    // MARK: - Known hole: the bridge publishes results on any response topic

    /// A hub chooses the MQTT 5 response topic of its requests, and the bridge publishes the result there with its
    /// own rights, which include every device's commands topic. The ACL cannot tell that result from a command: the
    /// bridge must accept only response topics under `R/hubs/{that hub}/responses/`. Until it does, this records the
    /// hole as a known issue; when the bridge is fixed, the known issue stops happening and this test says so.
    @Test func aHubCannotMakeTheBridgeWriteOnADevicesCommands() async throws {
        let secure = try await SecureBroker()
        let bridge = try await Self.startBridge(on: secure)
        let hub = try await Client(Self.hub1, on: secure, subscribe: ["audio/hubs/hub-1/accessories/+/result"])
        let device = try await Client(Self.source1.topicID, on: secure, subscribe: [Self.commandsTopic(Self.source1)])
        try await hub.setUp("headphones", primary: Self.source1)
        _ = try await hub.request(
            .placement(.onHead), accessory: "headphones",
            properties: MQTTProperties(responseTopic: Self.commandsTopic(Self.source1), correlationData: [1]))
        // The bridge's ROUTE comes after whatever it sent on behalf of the request above.
        try device.report(.media)
        _ = try await device.waitForCommands(1, for: Self.source1) { $0.action == .routeToAccessory }
        // The bridge answers only on response topics under the requesting hub's own responses/.
        #expect(device.messages(on: Self.commandsTopic(Self.source1)).count == 1, "only the bridge's ROUTE")
        for client in [hub, device] { await client.close() }
        try await bridge.stop()
    }
}

// MARK: - Fixtures of these tests

extension SecurityTests {
    static let codec = WireCodec()

    static func accessory(_ index: Int) -> String { "acc-\(index)" }

    /// Whether `topic` matches the MQTT filter `filter` ("+" one level, "#" all that follow).
    static func topic(_ topic: String, matches filter: String) -> Bool {
        let levels = topic.split(separator: "/", omittingEmptySubsequences: false)
        let parts = filter.split(separator: "/", omittingEmptySubsequences: false)
        for (index, part) in parts.enumerated() {
            if part == "#" { return true }
            guard index < levels.count, part == "+" || part == levels[index] else { return false }
        }
        return levels.count == parts.count
    }

    static func hubStatus(online: Bool) -> [UInt8] {
        var status = Audioaccessory_V1_HubStatus()
        status.online = online
        status.sinceUnixMs = 1_763_790_000_000
        return codec.encode(status, as: .protobuf)
    }

    static func sourceState(_ activity: Activity) -> [UInt8] {
        codec.encode(Audioaccessory_V1_SourceState(SourceReport(activity: activity)), as: .protobuf)
    }

    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    /// Runs deploy/mosquitto/passwords.sh; returns its exit status and output.
    static func runRecipe(_ file: URL, _ arguments: [String]) async throws -> (Int32, String) {
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("passwords-\(UUID().uuidString).log")
        defer { try? FileManager.default.removeItem(at: output) }
        let script = try ChildProcess(
            executable: deploy.appendingPathComponent("passwords.sh").path, arguments: [file.path] + arguments,
            outputPath: output.path)
        let status = try await script.exit()
        return (status, (try? String(contentsOf: output, encoding: .utf8)) ?? "")
    }

    /// Adds a user with passwords.sh, which makes the password and prints "user password".
    static func addUser(_ file: URL, _ arguments: [String]) async throws -> (user: String, password: String) {
        let (status, output) = try await runRecipe(file, arguments)
        let words = output.split(separator: "\n").last?.split(separator: " ") ?? []
        guard status == 0, words.count == 2 else {
            throw Failure(description: "passwords.sh \(arguments.joined(separator: " ")) exited with \(status): \(output)")
        }
        return (String(words[0]), String(words[1]))
    }

    /// How the broker knows who may do what.
    enum Access: String, CustomTestStringConvertible {
        /// deploy/mosquitto/mosquitto.conf as shipped: the dynamic security plugin, each client a user with a role,
        /// set up by ``BrokerRoles`` (what `accessoryctl roles` runs) while the broker runs.
        case roles
        /// The older way: a password file and deploy/mosquitto/acl.
        case aclFile

        var testDescription: String { rawValue }
    }

    /// A mosquitto with a TLS listener and passwords: deploy/mosquitto/mosquitto.conf with the test's paths (roles),
    /// or a password file and deploy/mosquitto/acl (aclFile).
    struct SecureBroker {
        let broker: MosquittoBroker
        let certificates: URL
        /// User name → password.
        let passwords: [String: String]
        let requireClientCertificate: Bool
        /// A user who reads everything: the plugin's admin, or a user of the ACL's own for the tests.
        let observer: String

        /// `other`'s broker, with these passwords (for users added since).
        init(copying other: SecureBroker, passwords: [String: String]) {
            broker = other.broker
            certificates = other.certificates
            self.passwords = passwords
            requireClientCertificate = other.requireClientCertificate
            observer = other.observer
        }

        /// Every user of ``SecurityTests/allUsers``, each with a password of its own, and the observer.
        init(access: Access = .roles, requireClientCertificate: Bool = false) async throws {
            let certificates = try await TestCertificates.make()
            var passwords: [String: String] = [:]
            for user in SecurityTests.allUsers { passwords[user] = "pw-\(UUID().uuidString)" }
            let listener = TestCertificates.listener(certificates, requireClientCertificate: requireClientCertificate)
            switch access {
            case .roles:
                observer = "admin"
                passwords[observer] = "pw-\(UUID().uuidString)"
                let dynsec = try await SecurityTests.initDynamicSecurity(
                    in: certificates, admin: observer, password: passwords[observer]!)
                broker = try await MosquittoBroker(
                    extraConfig: try SecurityTests.shippedConfiguration(certificates: certificates, dynsec: dynsec)
                        + "\nrequire_certificate \(requireClientCertificate)\n")
            case .aclFile:
                observer = "observer"
                passwords[observer] = "pw-\(UUID().uuidString)"
                let acl = certificates.appendingPathComponent("acl")
                try (String(contentsOf: SecurityTests.deploy.appendingPathComponent("acl"), encoding: .utf8)
                    + "\n# The tests' observer.\nuser observer\ntopic read #\n").write(to: acl, atomically: true, encoding: .utf8)
                broker = try await MosquittoBroker(users: passwords, extraConfig: listener + "\nacl_file \(acl.path)\n")
            }
            self.certificates = certificates
            self.passwords = passwords
            self.requireClientCertificate = requireClientCertificate
            if access == .roles { try await provision() }
        }

        /// The roles and users, as docs/security.md's set-up makes them: `roles init`, then a user for each.
        private func provision() async throws {
            var mqtt = MQTTConfiguration(clientID: "admin-\(UUID().uuidString.prefix(8))")
            configure(&mqtt, as: observer)
            var logger = Logger(label: "roles")
            logger.logLevel = .warning
            let roles = try BrokerRoles(mqtt: mqtt, logger: logger)
            do {
                try await roles.start(timeout: .seconds(20))
                try await roles.setUp(root: .default, homeAssistantPrefix: "homeassistant")
                try await roles.addClient(bridgeUser, password: passwords[bridgeUser]!, role: "bridge")
                try await roles.addClient(homeAutomation, password: passwords[homeAutomation]!, role: "home-automation")
                for hub in [hub1, hub2] { try await roles.addHub(HubID(hub)!, password: passwords[hub]!, root: .default) }
                for source in [source1, source2] {
                    try await roles.addDevice(source, password: passwords[source.topicID]!, root: .default)
                }
            } catch {
                await roles.stop()
                throw error
            }
            await roles.stop()
        }

        /// Points `mqtt` at the TLS listener, logged in as `user` with its password.
        func configure(_ mqtt: inout MQTTConfiguration, as user: String?) {
            mqtt.host = "localhost"  // the name in the server's certificate
            mqtt.port = broker.port
            mqtt.tls = MQTTConfiguration.TLS(caFile: certificates.path + "/ca.crt")
            if requireClientCertificate {
                mqtt.tls?.certificateFile = certificates.path + "/client.crt"
                mqtt.tls?.keyFile = certificates.path + "/client.key"
            }
            mqtt.username = user
            mqtt.password = user.flatMap { passwords[$0] }
        }
    }

    /// `mosquitto_ctrl dynsec init`, as docs/security.md says to run it (the password on standard input, twice): the
    /// plugin's file in `directory`, with its admin.
    static func initDynamicSecurity(in directory: URL, admin: String, password: String) async throws -> URL {
        let file = directory.appendingPathComponent("dynsec.json")
        let output = directory.appendingPathComponent("dynsec-init.log")
        let tool = try MosquittoBroker.findTool("mosquitto_ctrl", package: "mosquitto-clients")
        let process = try ChildProcess(
            executable: tool, arguments: ["dynsec", "init", file.path, admin], input: "\(password)\n\(password)\n",
            outputPath: output.path)
        // mosquitto_ctrl 2.0.11 exits with 0 even when it fails: the file says whether it worked.
        guard try await process.exit() == 0, FileManager.default.fileExists(atPath: file.path) else {
            throw Failure(description: "mosquitto_ctrl dynsec init: \((try? String(contentsOf: output, encoding: .utf8)) ?? "")")
        }
        return file
    }

    /// deploy/mosquitto/mosquitto.conf with its files in `certificates` and the plugin's file at `dynsec`, and without
    /// its listener and persistence location: the fixture's loopback listener comes before it, and becomes TLS by the
    /// shipped listener options that follow.
    static func shippedConfiguration(certificates: URL, dynsec: URL) throws -> String {
        let shipped = try String(contentsOf: deploy.appendingPathComponent("mosquitto.conf"), encoding: .utf8)
        let configuration = shipped.split(separator: "\n", omittingEmptySubsequences: false)
            .filter { !$0.hasPrefix("listener ") && !$0.hasPrefix("persistence_location ") }
            .joined(separator: "\n")
            .replacingOccurrences(of: "/var/lib/mosquitto/dynsec/dynsec.json", with: dynsec.path)
            .replacingOccurrences(of: "/etc/mosquitto/audio/", with: certificates.path + "/")
        #expect(configuration.contains("plugin_opt_config_file \(dynsec.path)"), "the shipped configuration uses roles")
        return configuration
    }

    /// Starts the bridge as bridge.audio over TLS, and waits for its online status (published once it has read the
    /// retained states and subscribed).
    static func startBridge(
        on secure: SecureBroker, configure: (inout BridgeConfiguration) -> Void = { _ in }
    ) async throws -> RunningBridge {
        let watcher = try await Client(homeAutomation, on: secure, subscribe: ["audio/bridge/status"])
        let bridge = try RunningBridge(broker: secure.broker) { configuration in
            secure.configure(&configuration.mqtt, as: bridgeUser)
            configure(&configuration)
        }
        let status = try await watcher.waitFor(1, on: "audio/bridge/status", timeout: .seconds(20))[0]
        #expect(try watcher.codec.decode(Audioaccessory_V1_BridgeStatus.self, from: status.payload, format: .protobuf).online)
        await watcher.close()
        return bridge
    }

    /// Runs `body`, then stops `hub` (an AccessoryHub must be stopped before it goes away), also when `body` throws.
    static func stoppingAtTheEnd(_ hub: AccessoryHub, _ body: () async throws -> Void) async throws {
        do {
            try await body()
        } catch {
            await hub.stop()
            throw error
        }
        await hub.stop()
    }

    /// Connects as `user` with `password` and returns the broker's refusal; throws when it is not refused in time.
    static func refusal(on secure: SecureBroker, user: String?, password: String?) async throws -> MQTTError {
        var mqtt = MQTTConfiguration(clientID: "refused-\(UUID().uuidString.prefix(8))")
        secure.configure(&mqtt, as: nil)
        mqtt.username = user
        mqtt.password = password
        mqtt.reconnectDelay = .milliseconds(100)
        let box = EventBox()
        var logger = Logger(label: "refused")
        logger.logLevel = .critical
        let client = try MQTTClient(configuration: mqtt, logger: logger)
        defer { Task { await client.close() } }
        try client.start(onEvent: { event in box.events.withLock { $0.append(event) } }, onMessage: { _ in })
        // Looked at once more after the deadline: a task that could not run for a while (a loaded machine) must not
        // report as missing what arrived meanwhile (under `make test-stress` it found seven refusals that way).
        let deadline = ContinuousClock.now + .seconds(30)
        while true {
            for event in box.events.withLock({ $0 }) {
                switch event {
                case .connectionRefused(let error): return error
                case .connected: throw Failure(description: "\(user ?? "anonymous") was let in")
                default: continue
                }
            }
            guard ContinuousClock.now < deadline else { break }
            try await Task.sleep(for: .milliseconds(20))
        }
        throw Failure(description: "\(user ?? "anonymous"): no answer from the broker: \(box.events.withLock { $0 })")
    }

    final class EventBox: Sendable {
        let events = Mutex<[MQTTEvent]>([])
    }

    /// An MQTT client logged in as one user over TLS, recording what it receives.
    final class Client: Sendable {
        let user: String
        let clientID: String
        let mqtt: MQTTClient
        let codec = WireCodec()
        private let broker: MosquittoBroker
        private let inbox: Inbox

        private final class Inbox: Sendable {
            let messages = Mutex<[MQTTMessage]>([])
        }

        /// Connects, and returns once the broker has registered each subscription (seen in its log).
        init(_ user: String, on secure: SecureBroker, subscribe filters: [String] = []) async throws {
            self.user = user
            clientID = "\(user)-\(UUID().uuidString.prefix(8))"
            broker = secure.broker
            var configuration = MQTTConfiguration(clientID: clientID)
            secure.configure(&configuration, as: user)
            var logger = Logger(label: clientID)
            logger.logLevel = .warning
            let inbox = Inbox()
            self.inbox = inbox
            mqtt = try MQTTClient(configuration: configuration, logger: logger)
            let offset = broker.logLength
            for filter in filters { try mqtt.subscribe(filter, qos: .atLeastOnce) }
            try mqtt.start { message in inbox.messages.withLock { $0.append(message) } }
            let client = mqtt
            try await SecurityTests.within(.seconds(10), "\(user) connecting") { try await client.waitUntilConnected() }
            for filter in filters {
                // mosquitto logs each subscription as "<client id> <qos> <filter>".
                try await broker.waitForLog("\(clientID) 1 \(filter)", after: offset, timeout: .seconds(10))
            }
        }

        deinit {
            // A test that throws midway leaves its clients behind: closing is idempotent.
            mqtt.syncClose()
        }

        func close() async {
            await mqtt.close()
        }

        /// Returns once the broker has handled everything this client sent before. mosquitto handles a client's
        /// packets in order and grants any subscription: when its log shows this one, the messages before it have
        /// gone wherever the ACL let them go. (Only for as many QoS 1 messages as may be unacknowledged at once: 20
        /// with mosquitto's default receive maximum, 100 at most for this client. Beyond, they wait in libmosquitto,
        /// and the subscription would overtake them.)
        func sync() async throws {
            let filter = "sync/\(UUID().uuidString.prefix(8))"
            let offset = broker.logLength
            try mqtt.subscribe(filter, qos: .atLeastOnce)
            try await broker.waitForLog("\(clientID) 1 \(filter)", after: offset, timeout: .seconds(10))
        }

        func publish(_ topic: String, _ payload: [UInt8], retain: Bool = false, properties: MQTTProperties = .none) throws {
            try mqtt.publish(MQTTMessage(topic: topic, payload: payload, retain: retain, properties: properties))
        }

        func allMessages() -> [MQTTMessage] {
            inbox.messages.withLock { $0 }
        }

        func messages(on topic: String) -> [MQTTMessage] {
            inbox.messages.withLock { $0.filter { $0.topic == topic } }
        }

        /// Waits until `count` messages arrived on `topic`, and returns them.
        func waitFor(_ count: Int, on topic: String, timeout: Duration = .seconds(10)) async throws -> [MQTTMessage] {
            try await waitForAll(count, where: { $0.topic == topic }, timeout: timeout)
        }

        /// Waits until `count` messages that match arrived, and returns them.
        func waitForAll(
            _ count: Int, where matches: (MQTTMessage) -> Bool, timeout: Duration = .seconds(10)
        ) async throws -> [MQTTMessage] {
            let deadline = ContinuousClock.now + timeout
            while true {
                let found = allMessages().filter(matches)
                if found.count >= count { return found }
                guard ContinuousClock.now < deadline else {
                    throw Failure(description: "\(user): \(found.count) of \(count) messages within \(timeout)")
                }
                try await Task.sleep(for: .milliseconds(20))
            }
        }

        // MARK: As a hub

        /// Publishes telemetry, as this user's hub unless `hub` says otherwise.
        func sendTelemetry(
            _ request: AccessoryRequest, hub: String? = nil, accessory: String, properties: MQTTProperties = .none
        ) throws {
            var properties = properties
            properties.contentType = PayloadFormat.protobuf.contentType
            try publish(
                "audio/hubs/\(hub ?? user)/accessories/\(accessory)/telemetry",
                codec.encode(Audioaccessory_V1_AccessoryTelemetry(request), as: .protobuf), properties: properties)
        }

        /// Sends telemetry as this user's hub, and waits for the result on the hub's result topic.
        @discardableResult
        func request(
            _ request: AccessoryRequest, accessory: String, properties: MQTTProperties = .none
        ) async throws -> Audioaccessory_V1_RequestResult {
            let topic = "audio/hubs/\(user)/accessories/\(accessory)/result"
            let before = messages(on: topic).count
            try sendTelemetry(request, accessory: accessory, properties: properties)
            let result = try await waitFor(before + 1, on: topic)[before]
            return try codec.decode(Audioaccessory_V1_RequestResult.self, from: result.payload, format: .protobuf)
        }

        /// Pairs, registers, connects to `primary` and puts on an accessory.
        func setUp(_ accessory: String, primary: BluetoothAddress) async throws {
            for step: AccessoryRequest in [
                .paired(name: accessory, model: "", hardwareCapabilities: .all), .register(.all),
                .sources(primary: primary.data, secondary: nil), .placement(.onHead),
            ] {
                let result = try await request(step, accessory: accessory)
                #expect(result.error == .none, "\(step.name) \(accessory): \(result.message)")
            }
        }

        // MARK: As a playing device

        /// Retains this device's state.
        func report(_ activity: Activity) throws {
            let address = try #require(BluetoothAddress(topicID: user))
            try publish(
                Topic.sourceState(source: address).name(under: .default), SecurityTests.sourceState(activity),
                retain: true)
        }

        /// Waits for `count` commands for `source` that match, and returns them decoded.
        func waitForCommands(
            _ count: Int, for source: BluetoothAddress,
            where matches: @escaping (Audioaccessory_V1_SwitchCommand) -> Bool = { _ in true }
        ) async throws -> [Audioaccessory_V1_SwitchCommand] {
            let topic = SecurityTests.commandsTopic(source)
            let codec = codec
            let decode = { (message: MQTTMessage) in
                try? codec.decode(Audioaccessory_V1_SwitchCommand.self, from: message.payload, format: .protobuf)
            }
            return try await waitForAll(count, where: { $0.topic == topic && decode($0).map(matches) == true })
                .compactMap(decode)
        }

        // MARK: As an observer

        /// The states received for `accessory`, decoded.
        func states(of accessory: String) throws -> [Audioaccessory_V1_AccessoryState] {
            try messages(on: SecurityTests.stateTopic(accessory)).map {
                try codec.decode(Audioaccessory_V1_AccessoryState.self, from: $0.payload, format: .protobuf)
            }
        }

        /// Waits for a state of `accessory` that matches, and returns it.
        func waitForState(
            of accessory: String, where matches: @escaping (Audioaccessory_V1_AccessoryState) -> Bool
        ) async throws -> Audioaccessory_V1_AccessoryState {
            let topic = SecurityTests.stateTopic(accessory)
            let codec = codec
            let decode = { (message: MQTTMessage) in
                try? codec.decode(Audioaccessory_V1_AccessoryState.self, from: message.payload, format: .protobuf)
            }
            let found = try await waitForAll(1, where: { $0.topic == topic && decode($0).map(matches) == true })
            return try #require(found.first.flatMap(decode))
        }
    }

    /// Runs `operation`; throws when it has not finished within `timeout` (and cancels it).
    static func within<T: Sendable>(
        _ timeout: Duration, _ what: String, _ operation: @escaping @Sendable () async throws -> T
    ) async throws -> T {
        try await withThrowingTaskGroup(of: T?.self) { group in
            group.addTask { try await operation() }
            group.addTask {
                try await Task.sleep(for: timeout)
                return nil
            }
            defer { group.cancelAll() }
            guard let first = try await group.next(), let value = first else {
                throw Failure(description: "\(what) did not finish within \(timeout)")
            }
            return value
        }
    }
}
