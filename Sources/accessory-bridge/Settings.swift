import AccessoryBridge
import AccessoryWire
import ArgumentParser
import Configuration
import Foundation
import Logging
import MQTTClient
import SystemPackage

/// The bridge's settings: command-line options, then `AUDIO_BRIDGE_*` environment variables, then a JSON config file,
/// then defaults.
enum Settings {

    /// The options; each is optional here so the environment and the file can supply it.
    struct Options: ParsableArguments {
        @Option(help: "The broker: mqtt://host:port, or mqtts://host:port for TLS. (default: mqtt://127.0.0.1:1883)")
        var broker: String?

        @Option(help: "The first topic levels of the contract. (default: audio)")
        var topicRoot: String?

        @Option(help: "The MQTT client identifier. (default: accessory-bridge)")
        var clientID: String?

        @Option(help: "The MQTT user name.")
        var username: String?

        @Option(help: "The MQTT password; prefer AUDIO_BRIDGE_PASSWORD, which stays out of the process list.")
        var password: String?

        @Option(help: "The PEM file of the CA that signs the broker's certificate (TLS).")
        var caFile: String?

        @Option(help: "The PEM file of the bridge's client certificate (TLS client authentication).")
        var certFile: String?

        @Option(help: "The PEM file of the client certificate's private key.")
        var keyFile: String?

        @Option(help: "Seconds after taking an accessory off during which putting it back on resumes playback. (default: 15)")
        var resumeWindow: Double?

        @Option(help: "Seconds after a call displaced media during which the call's end resumes the media. (default: 300)")
        var interruptionWindow: Double?

        @Option(help: "The Home Assistant discovery prefix. (default: homeassistant)")
        var homeassistantPrefix: String?

        @Flag(help: "No Home Assistant discovery (the JSON views and events for home automation stay).")
        var noHomeassistant = false

        @Flag(help: "Nothing for home automation: no JSON views, switch events, availability or discovery.")
        var noHomeAutomation = false

        @Option(help: "Seconds a declared capability may go unreported before it gets a diagnostic. (default: 30)")
        var diagnosticsGracePeriod: Double?

        @Option(help: "The format of commands and of states no request decides: protobuf or json. (default: protobuf)")
        var payloadFormat: String?

        @Option(help: "Seconds the broker keeps the bridge's session (and the telemetry for it) while it is away. (default: 86400)")
        var sessionExpiry: Double?

        @Flag(help: "Publish through the one connection that receives: under overload, answers are then dropped rather than the telemetry left waiting at the broker.")
        var noPublishingSession = false

        @Option(help: "The largest inbound payload, in bytes. (default: 65536)")
        var maxPayloadSize: Int?

        @Option(help: "trace, debug, info, notice, warning, error or critical. (default: info)")
        var logLevel: String?

        @Option(help: "text or json (one JSON object per line). (default: text)")
        var logFormat: String?

        @Option(help: "The address /metrics and /health/* listen on. (default: 127.0.0.1)")
        var httpHost: String?

        @Option(help: "The port /metrics and /health/* listen on. (default: 9464)")
        var httpPort: Int?

        @Flag(help: "No HTTP listener: no /metrics, no /health/*.")
        var noHttp = false

        @Option(help: "A JSON file of settings, keyed by option name.")
        var configFile: String?

        /// The options given on the command line, keyed as in the environment and the file.
        var given: [String: String] {
            var given: [String: String] = [:]
            given["broker"] = broker
            given["topic-root"] = topicRoot
            given["client-id"] = clientID
            given["username"] = username
            given["password"] = password
            given["ca-file"] = caFile
            given["cert-file"] = certFile
            given["key-file"] = keyFile
            given["resume-window"] = resumeWindow.map { "\($0)" }
            given["interruption-window"] = interruptionWindow.map { "\($0)" }
            given["homeassistant-prefix"] = homeassistantPrefix
            if noHomeassistant { given["homeassistant"] = "false" }
            if noHomeAutomation { given["home-automation"] = "false" }
            given["diagnostics-grace-period"] = diagnosticsGracePeriod.map { "\($0)" }
            given["session-expiry"] = sessionExpiry.map { "\($0)" }
            if noPublishingSession { given["publishing-session"] = "false" }
            given["payload-format"] = payloadFormat
            given["max-payload-size"] = maxPayloadSize.map { "\($0)" }
            given["log-level"] = logLevel
            given["log-format"] = logFormat
            given["http-host"] = httpHost
            given["http-port"] = httpPort.map { "\($0)" }
            if noHttp { given["http"] = "false" }
            return given
        }
    }

    struct Resolved {
        var bridge: BridgeConfiguration
        /// Where /metrics and /health/* listen; `nil`: nowhere.
        var http: (host: String, port: Int)?
        var logLevel: Logger.Level
        var logHandlerFactory: @Sendable (String) -> any LogHandler
    }

    struct Invalid: Error, CustomStringConvertible {
        var description: String
    }

    static func resolve(
        _ options: Options, environment: [String: String] = ProcessInfo.processInfo.environment
    ) async throws -> Resolved {
        let environmentProvider = EnvironmentVariablesProvider(
            environmentVariables: environment, secretsSpecifier: .specific(["AUDIO_BRIDGE_PASSWORD"])
        ).prefixKeys(with: ["audio-bridge"])
        var providers: [any ConfigProvider] = [
            InMemoryProvider(
                name: "command line",
                values: Dictionary(
                    uniqueKeysWithValues: options.given.map { (AbsoluteConfigKey([$0.key]), ConfigValue(.string($0.value), isSecret: $0.key == "password")) })),
            environmentProvider,
        ]
        if let file = options.configFile ?? environment["AUDIO_BRIDGE_CONFIG_FILE"] {
            providers.append(try await FileProvider<JSONSnapshot>(filePath: FilePath(file)))
        }
        let config = ConfigReader(providers: providers)

        func number(_ key: String) throws -> Double? {
            guard let text = config.string(forKey: ConfigKey([key])) else { return nil }
            guard let value = Double(text), value >= 0 else { throw Invalid(description: "\(key) must be a number of seconds ≥ 0, not '\(text)'") }
            return value
        }

        let broker = try BrokerURL(parsing: config.string(forKey: ConfigKey(["broker"]), default: "mqtt://127.0.0.1:1883"))
        var mqtt = MQTTConfiguration(clientID: config.string(forKey: ConfigKey(["client-id"]), default: "accessory-bridge"))
        mqtt.host = broker.host
        mqtt.port = broker.port
        mqtt.username = config.string(forKey: ConfigKey(["username"]))
        mqtt.password = config.string(forKey: ConfigKey(["password"]), isSecret: true)
        let caFile = config.string(forKey: ConfigKey(["ca-file"]))
        if broker.usesTLS || caFile != nil {
            guard let caFile else {
                throw Invalid(description: "\(broker) uses TLS: give the CA file with --ca-file or AUDIO_BRIDGE_CA_FILE")
            }
            mqtt.tls = .init(
                caFile: caFile, certificateFile: config.string(forKey: ConfigKey(["cert-file"])),
                keyFile: config.string(forKey: ConfigKey(["key-file"])))
        }

        var bridge = BridgeConfiguration(mqtt: mqtt)
        let rootText = config.string(forKey: ConfigKey(["topic-root"]), default: "audio")
        guard let root = TopicRoot(rootText) else {
            throw Invalid(description: "topic-root '\(rootText)' must be \(TopicRoot.grammar)")
        }
        bridge.topicRoot = root
        if let seconds = try number("resume-window") { bridge.resumeWindow = .milliseconds(Int64(seconds * 1000)) }
        if let seconds = try number("interruption-window") {
            bridge.interruptionWindow = .milliseconds(Int64(seconds * 1000))
        }
        if let seconds = try number("diagnostics-grace-period") {
            bridge.diagnosticsGracePeriod = .milliseconds(Int64(seconds * 1000))
        }
        if let seconds = try number("session-expiry") { bridge.sessionExpiry = .milliseconds(Int64(seconds * 1000)) }
        func flag(_ key: String) throws -> Bool {
            let text = config.string(forKey: ConfigKey([key]), default: "true").lowercased()
            guard let value = ["true": true, "1": true, "yes": true, "false": false, "0": false, "no": false][text] else {
                throw Invalid(description: "\(key) must be true or false, not '\(text)'")
            }
            return value
        }
        bridge.homeAutomation = try flag("home-automation")
        bridge.publishingSession = try flag("publishing-session")
        let prefix = config.string(forKey: ConfigKey(["homeassistant-prefix"]), default: "homeassistant")
        guard !prefix.isEmpty, !prefix.contains("+"), !prefix.contains("#") else {
            throw Invalid(description: "homeassistant-prefix must be a topic prefix without wildcards, not '\(prefix)'")
        }
        bridge.homeAssistantPrefix = try flag("homeassistant") ? prefix : nil
        let formatText = config.string(forKey: ConfigKey(["payload-format"]), default: "protobuf")
        guard let format = PayloadFormat(rawValue: formatText) else {
            throw Invalid(description: "payload-format must be protobuf or json, not '\(formatText)'")
        }
        bridge.payloadFormat = format
        if let size = config.string(forKey: ConfigKey(["max-payload-size"])) {
            guard let bytes = Int(size), bytes > 0 else {
                throw Invalid(description: "max-payload-size must be a number of bytes > 0, not '\(size)'")
            }
            bridge.maximumPayloadSize = bytes
        }

        var http: (host: String, port: Int)?
        if try flag("http") {
            let portText = config.string(forKey: ConfigKey(["http-port"]), default: "9464")
            guard let port = Int(portText), (0...65535).contains(port) else {
                throw Invalid(description: "http-port must be a port number 0...65535, not '\(portText)'")
            }
            let host = config.string(forKey: ConfigKey(["http-host"]), default: "127.0.0.1")
            guard !host.isEmpty else { throw Invalid(description: "http-host must be an address, such as 127.0.0.1") }
            http = (host, port)
        }

        let levelText = config.string(forKey: ConfigKey(["log-level"]), default: "info")
        guard let level = Logger.Level(rawValue: levelText) else {
            throw Invalid(description: "log-level must be one of \(Logger.Level.allCases.map(\.rawValue).joined(separator: ", ")), not '\(levelText)'")
        }
        let logFormat = config.string(forKey: ConfigKey(["log-format"]), default: "text")
        let factory: @Sendable (String) -> any LogHandler
        switch logFormat {
        case "text": factory = { StreamLogHandler.standardError(label: $0) }
        case "json": factory = { JSONLogHandler(label: $0) }
        default: throw Invalid(description: "log-format must be text or json, not '\(logFormat)'")
        }
        return Resolved(bridge: bridge, http: http, logLevel: level, logHandlerFactory: factory)
    }
}
