@testable import accessory_bridge
@testable import AccessoryWire
import ArgumentParser
import Foundation
import Testing

/// Where each setting comes from: a flag wins over the environment, which wins over the config file.
@Suite struct SettingsTests {
    func resolve(_ arguments: [String], environment: [String: String] = [:]) async throws -> Settings.Resolved {
        try await Settings.resolve(arguments, environment: environment)
    }

    @Test func defaults() async throws {
        let settings = try await resolve([])
        #expect(settings.bridge.mqtt.host == "127.0.0.1")
        #expect(settings.bridge.mqtt.port == 1883)
        #expect(settings.bridge.mqtt.clientID == "accessory-bridge")
        #expect(settings.bridge.mqtt.tls == nil)
        #expect(settings.bridge.topicRoot == .default)
        #expect(settings.bridge.policy.routing.resumeWindow == .seconds(15))
        #expect(settings.bridge.policy.routing.interruptionWindow == .seconds(300))
        #expect(settings.bridge.policy.accessory.diagnosticsGracePeriod == .seconds(30))
        #expect(settings.bridge.payloadFormat == .protobuf)
        #expect(settings.bridge.maximumPayloadSize == 65_536)
        #expect(settings.bridge.sessionExpiry == .seconds(86_400))
        #expect(settings.bridge.publishingSession)
        #expect(settings.logLevel == .info)
    }

    @Test func theInterruptionWindowIsASettingLikeTheOthers() async throws {
        #expect(try await resolve(["--interruption-window", "90"]).bridge.policy.routing.interruptionWindow == .seconds(90))
        let fromEnvironment = try await resolve([], environment: ["AUDIO_BRIDGE_INTERRUPTION_WINDOW": "2.5"])
        #expect(fromEnvironment.bridge.policy.routing.interruptionWindow == .milliseconds(2500))
        await #expect(throws: (any Error).self) { try await resolve(["--interruption-window", "-3"]) }
    }

    @Test func homeAutomationAndHTTPAreOnByDefaultAndCanBeTurnedOff() async throws {
        let defaults = try await resolve([])
        #expect(defaults.bridge.homeAutomation && defaults.bridge.homeAssistantPrefix == "homeassistant")
        #expect(defaults.httpListener?.host == "127.0.0.1" && defaults.httpListener?.port == 9464)
        let off = try await resolve(["--no-http", "--no-homeassistant"])
        #expect(off.httpListener == nil && off.bridge.homeAssistantPrefix == nil && off.bridge.homeAutomation)
        #expect(try await resolve(["--no-home-automation"]).bridge.homeAutomation == false)
        #expect(try await resolve(["--no-publishing-session"]).bridge.publishingSession == false)
        #expect(try await resolve([], environment: ["AUDIO_BRIDGE_PUBLISHING_SESSION": "false"]).bridge.publishingSession == false)
        let environment = try await resolve([], environment: [
            "AUDIO_BRIDGE_HTTP_HOST": "0.0.0.0", "AUDIO_BRIDGE_HTTP_PORT": "9100", "AUDIO_BRIDGE_HOMEASSISTANT_PREFIX": "ha",
        ])
        #expect(environment.httpListener?.host == "0.0.0.0" && environment.httpListener?.port == 9100)
        #expect(environment.bridge.homeAssistantPrefix == "ha")
        #expect(try await resolve([], environment: ["AUDIO_BRIDGE_HTTP": "false"]).httpListener == nil)
    }

    @Test func aFlagWinsOverTheEnvironmentWhichWinsOverTheFile() async throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("bridge-\(UUID().uuidString).json")
        try Data(#"{"topic-root": "from-file", "client-id": "file-id", "resume-window": "7", "payload-format": "json"}"#.utf8)
            .write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let settings = try await resolve(
            ["--config-file", file.path, "--topic-root", "from-flag", "--session-expiry", "3600"],
            environment: ["AUDIO_BRIDGE_TOPIC_ROOT": "from-env", "AUDIO_BRIDGE_CLIENT_ID": "env-id"])
        #expect(settings.bridge.topicRoot.rawValue == "from-flag")
        #expect(settings.bridge.mqtt.clientID == "env-id")
        #expect(settings.bridge.policy.routing.resumeWindow == .seconds(7))
        #expect(settings.bridge.payloadFormat == .json)
        #expect(settings.bridge.sessionExpiry == .seconds(3600))
    }

    @Test func theConfigFileCanComeFromTheEnvironment() async throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("bridge-\(UUID().uuidString).json")
        try Data(#"{"broker": "mqtts://broker.example:8884", "ca-file": "/etc/ca.pem", "password": "s3cret"}"#.utf8).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let settings = try await resolve([], environment: ["AUDIO_BRIDGE_CONFIG_FILE": file.path])
        #expect(settings.bridge.mqtt.host == "broker.example")
        #expect(settings.bridge.mqtt.port == 8884)
        #expect(settings.bridge.mqtt.tls?.caFile == "/etc/ca.pem")
        #expect(settings.bridge.mqtt.password == "s3cret")
    }

    @Test(arguments: [
        (["--broker", "mqtts://broker:8883"], "uses TLS: give the CA file"),
        (["--broker", "ftp://broker"], "unknown scheme 'ftp'"),
        (["--broker", "broker:70000"], "the port must be a number from 1 to 65535"),
        (["--topic-root", "a/#"], "topic-root 'a/#' must be"),
        (["--payload-format", "xml"], "payload-format must be protobuf or json"),
        (["--resume-window=-1"], "resume-window must be a number of seconds"),
        (["--log-level", "loud"], "log-level must be one of"),
        (["--log-format", "yaml"], "log-format must be text or json"),
        (["--max-payload-size", "0"], "max-payload-size must be a number of bytes > 0"),
        (["--http-port", "70000"], "http-port must be a port number 0...65535"),
        (["--homeassistant-prefix", "ha/#"], "homeassistant-prefix must be a topic prefix without wildcards"),
    ])
    func badSettingsAreExplained(_ arguments: [String], _ explanation: String) async throws {
        do {
            _ = try await resolve(arguments)
            Issue.record("\(arguments) must be refused")
        } catch {
            #expect("\(error)".contains(explanation), "\(error)")
        }
    }

    @Test func aBadEnvironmentValueIsExplainedToo() async throws {
        await #expect(throws: (any Error).self) {
            _ = try await resolve([], environment: ["AUDIO_BRIDGE_PAYLOAD_FORMAT": "xml"])
        }
    }
}
