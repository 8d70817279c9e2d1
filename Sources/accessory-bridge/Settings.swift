import AccessoryBridge
import AccessoryModel
import AccessoryWire
import BridgeCluster
import Configuration
import Etcd
import Foundation
import Logging
import MQTTClient
import SystemPackage

/// The bridge's settings, each declared once in ``table``: its key, which is also its option (`--key`, and `--no-key`
/// for a switch), its environment variable (`AUDIO_BRIDGE_KEY`, `_` for `-`) and its key in the JSON config file; its
/// help; how its value is read; and where it goes in ``Resolved``. Its default is the value ``Resolved`` starts with
/// (the bridge's own are ``BridgeConfiguration``'s), written there once and shown by `--help` from there.
///
/// A flag wins over the environment, which wins over the file, which wins over the default. Values are read through
/// swift-configuration's typed readers: a number in the file may be a JSON number or a string.
enum Settings {
    /// Everything the settings decide, each field starting at its default.
    struct Resolved {
        var bridge = BridgeConfiguration()
        /// Where the broker listens; with the TLS files, it makes `bridge.mqtt` (``finish()``).
        var broker = BrokerURL(host: BridgeConfiguration().mqtt.host, port: BridgeConfiguration().mqtt.port)
        var caFile: String?
        var certFile: String?
        var keyFile: String?
        /// Home Assistant discovery on, under ``homeAssistantPrefix``: `bridge.homeAssistantPrefix` (``finish()``).
        var homeAssistant = true
        var homeAssistantPrefix = BridgeConfiguration().homeAssistantPrefix ?? "homeassistant"
        /// Where /metrics and /health/* listen, when ``httpOn``.
        var httpOn = true
        var http = HTTPListener()
        var logLevel = Logger.Level.info
        var logFormat = LogFormat.text
        /// etcd's URL: with it, the bridge is a member of a cluster (``cluster``, from the fields below).
        var etcd: String?
        var clusterName = ClusterConfiguration(endpoint: "").name
        /// `nil`: not given (a member takes the cluster's recorded count).
        var slots: ClusterSlots?
        var networkLoops = ClusterConfiguration(endpoint: "").networkLoops
        var member = ClusterConfiguration.defaultMember
        var etcdCAFile: String?
        var etcdCertFile: String?
        var etcdKeyFile: String?
        /// Made by ``finish()`` when ``etcd`` is given.
        var cluster: ClusterConfiguration?

        struct HTTPListener {
            var host = "127.0.0.1"
            var port = 9464
        }

        enum LogFormat: String, CaseIterable {
            case text, json

            var factory: @Sendable (String) -> any LogHandler {
                switch self {
                case .text: { StreamLogHandler.standardError(label: $0) }
                case .json: { JSONLogHandler(label: $0) }
                }
            }
        }

        /// The endpoint's address; `nil`: none.
        var httpListener: HTTPListener? { httpOn ? http : nil }

        /// Makes the MQTT connection from the broker and the TLS files, and the discovery prefix from its switch.
        mutating func finish() throws {
            bridge.mqtt.host = broker.host
            bridge.mqtt.port = broker.port
            bridge.mqtt.tls = nil
            if broker.usesTLS || caFile != nil {
                guard let caFile else {
                    throw Invalid(description: "\(broker) uses TLS: give the CA file with --ca-file or AUDIO_BRIDGE_CA_FILE")
                }
                bridge.mqtt.tls = .init(caFile: caFile, certificateFile: certFile, keyFile: keyFile)
            }
            bridge.homeAssistantPrefix = homeAssistant ? homeAssistantPrefix : nil
            cluster = nil
            if let etcd {
                var cluster = ClusterConfiguration(endpoint: etcd)
                cluster.name = clusterName
                cluster.slots = slots
                cluster.networkLoops = networkLoops
                cluster.member = member
                if etcd.hasPrefix("https://") || etcd.hasPrefix("etcds://") || etcdCAFile != nil {
                    guard let etcdCAFile else {
                        throw Invalid(description: "\(etcd) uses TLS: give etcd's CA file with --etcd-ca-file")
                    }
                    cluster.tls = .init(caFile: etcdCAFile, certificateFile: etcdCertFile, keyFile: etcdKeyFile)
                }
                self.cluster = cluster
            }
        }
    }

    struct Invalid: Error, CustomStringConvertible {
        var description: String
    }

    /// One setting.
    struct Setting: Sendable {
        enum Form: Sendable {
            /// `--key <placeholder>`.
            case value(placeholder: String)
            /// On by default; `--no-key` turns it off (`false` in the environment or the file).
            case switchedOff
        }

        let key: String
        let form: Form
        let help: String
        /// Reads it, when it is given anywhere, into the settings.
        let read: @Sendable (ConfigReader, String, inout Resolved) throws -> Void
        /// Its default, for `--help`; `nil`: none.
        let shown: @Sendable (Resolved) -> String?

        var flag: String {
            switch form {
            case .value: "--\(key)"
            case .switchedOff: "--no-\(key)"
            }
        }

        var environmentVariable: String {
            "AUDIO_BRIDGE_" + key.uppercased().replacingOccurrences(of: "-", with: "_")
        }
    }

    /// Every setting, in the order `--help` lists them.
    static let table: [Setting] = [
        .parsed("broker", \.broker, "url", "The broker: mqtt://host:port, or mqtts://host:port for TLS.") { text in
            do throws(MQTTError) { return try BrokerURL(parsing: text) } catch { throw Invalid(description: error.message) }
        },
        .parsed("topic-root", \.bridge.topicRoot, "levels", "The first topic levels of the contract.") { text in
            guard let root = TopicRoot(text) else {
                throw Invalid(description: "topic-root '\(text)' must be \(TopicRoot.grammar)")
            }
            return root
        },
        .text("client-id", \.bridge.mqtt.clientID, "The MQTT client identifier."),
        .optionalText("username", \.bridge.mqtt.username, "The MQTT user name."),
        .optionalText(
            "password", \.bridge.mqtt.password,
            "The MQTT password; prefer AUDIO_BRIDGE_PASSWORD, which stays out of the process list.", secret: true),
        .optionalText("ca-file", \.caFile, "The PEM file of the CA that signs the broker's certificate (TLS)."),
        .optionalText("cert-file", \.certFile, "The PEM file of the bridge's client certificate (TLS client authentication)."),
        .optionalText("key-file", \.keyFile, "The PEM file of the client certificate's private key."),
        .seconds(
            "resume-window", \.bridge.policy.routing.resumeWindow,
            "Seconds after taking an accessory off during which putting it back on resumes playback."),
        .seconds(
            "interruption-window", \.bridge.policy.routing.interruptionWindow,
            "Seconds after a call displaced media during which the call's end resumes the media."),
        .seconds(
            "diagnostics-grace-period", \.bridge.policy.accessory.diagnosticsGracePeriod,
            "Seconds a declared capability may go unreported before it gets a diagnostic."),
        .seconds(
            "hub-offline-grace", \.bridge.policy.hubOfflineGrace,
            "Seconds a hub may be offline before its accessories turn stale and their routes are released (0: at once)."),
        .seconds(
            "session-expiry", \.bridge.sessionExpiry,
            "Seconds the broker keeps the bridge's session (and the telemetry for it) while it is away."),
        .parsed(
            "payload-format", \.bridge.payloadFormat, "format",
            "The format of the bridge's status and layout, and of what goes to a hub or device not heard from yet (each one heard from gets its own): protobuf or json."
        ) { text in
            guard let format = PayloadFormat(rawValue: text) else {
                throw Invalid(description: "payload-format must be protobuf or json, not '\(text)'")
            }
            return format
        },
        .switchedOff(
            "publishing-session", \.bridge.publishingSession,
            "Publish through the one connection that receives: under overload, answers are then dropped rather than "
                + "the telemetry left waiting at the broker."),
        .parsed("max-payload-size", \.bridge.maximumPayloadSize, "bytes", "The largest inbound payload, in bytes.") {
            guard let bytes = Int($0), bytes > 0 else {
                throw Invalid(description: "max-payload-size must be a number of bytes > 0, not '\($0)'")
            }
            return bytes
        },
        .parsed("homeassistant-prefix", \.homeAssistantPrefix, "prefix", "The Home Assistant discovery prefix.") {
            guard !$0.isEmpty, !$0.contains("+"), !$0.contains("#") else {
                throw Invalid(description: "homeassistant-prefix must be a topic prefix without wildcards, not '\($0)'")
            }
            return $0
        },
        .switchedOff(
            "homeassistant", \.homeAssistant, "No Home Assistant discovery (the JSON views and events for home "
                + "automation stay)."),
        .switchedOff(
            "home-automation", \.bridge.homeAutomation,
            "Nothing for home automation: no JSON views, switch events, availability or discovery."),
        .parsed("log-level", \.logLevel, "level", "trace, debug, info, notice, warning, error or critical.") { text in
            guard let level = Logger.Level(rawValue: text) else {
                throw Invalid(
                    description: "log-level must be one of "
                        + "\(Logger.Level.allCases.map(\.rawValue).joined(separator: ", ")), not '\(text)'")
            }
            return level
        },
        .parsed("log-format", \.logFormat, "format", "text or json (one JSON object per line).") {
            guard let format = Resolved.LogFormat(rawValue: $0) else {
                throw Invalid(description: "log-format must be text or json, not '\($0)'")
            }
            return format
        },
        .parsed("http-host", \.http.host, "address", "The address /metrics and /health/* listen on.") {
            guard !$0.isEmpty else { throw Invalid(description: "http-host must be an address, such as 127.0.0.1") }
            return $0
        },
        .parsed("http-port", \.http.port, "port", "The port /metrics and /health/* listen on (0: any free one).") {
            guard let port = Int($0), (0...65535).contains(port) else {
                throw Invalid(description: "http-port must be a port number 0...65535, not '\($0)'")
            }
            return port
        },
        .switchedOff("http", \.httpOn, "No HTTP listener: no /metrics, no /health/*."),
        .optionalText(
            "cluster", \.etcd,
            "etcd's URL (etcd://host:port, or https://host:port with --etcd-ca-file): run as a member of a cluster of "
                + "bridges that share the slots (docs/scale-out.md). Each slot's MQTT client id is "
                + "{cluster-name}-slot-{slot}; --client-id is not used."),
        .parsed(
            "cluster-name", \.clusterName, "name",
            "The cluster's name: its keys in etcd (/aab/{name}/) and its slots' client ids."
        ) { text in
            guard HubID(text) != nil else {
                throw Invalid(description: "cluster-name must be \(IdentifierGrammar.description), not '\(text)'")
            }
            return text
        },
        Setting(
            key: "slots", form: .value(placeholder: "count"),
            help: "How many slots the cluster's work is split into (1...4096). Not given, a member takes the count the "
                + "cluster recorded, and a new cluster has \(ClusterConfiguration.defaultSlots.count); given, it must be "
                + "the recorded count. Every hub and tool of the cluster uses the same (or reads the bridge's layout).",
            read: { config, key, settings in
                guard let text = try Setting.text(config, key) else { return }
                guard let count = Int(text), let slots = ClusterSlots(count) else {
                    throw Invalid(description: "slots must be a number 1...4096, not '\(text)'")
                }
                settings.slots = slots
            },
            shown: { $0.slots.map { "\($0.count)" } }),
        .parsed(
            "network-loops", \.networkLoops, "count",
            "How many network threads run the slots' connections (1...256; by default one per two cores, at least one)."
        ) { text in
            guard let count = Int(text), (1...256).contains(count) else {
                throw Invalid(description: "network-loops must be a number 1...256, not '\(text)'")
            }
            return count
        },
        .parsed("member", \.member, "name", "This bridge's name in the cluster: unique among its members.") { text in
            guard HubID(text) != nil else {
                throw Invalid(description: "member must be \(IdentifierGrammar.description), not '\(text)'")
            }
            return text
        },
        .optionalText("etcd-ca-file", \.etcdCAFile, "The PEM file of the CA that signs etcd's certificate (TLS)."),
        .optionalText("etcd-cert-file", \.etcdCertFile, "The PEM file of the bridge's client certificate for etcd."),
        .optionalText("etcd-key-file", \.etcdKeyFile, "The PEM file of that certificate's private key."),
    ]

    /// The JSON config file: `--config-file` or `AUDIO_BRIDGE_CONFIG_FILE` (the one setting that is not in the file).
    static let configFile = "config-file"

    /// Reads the settings from `arguments` (the command line after the program's name), the environment and the
    /// config file.
    static func resolve(
        _ arguments: [String], environment: [String: String] = ProcessInfo.processInfo.environment
    ) async throws -> Resolved {
        let given = try parse(arguments)
        let environmentProvider = EnvironmentVariablesProvider(
            environmentVariables: environment, secretsSpecifier: .specific(["AUDIO_BRIDGE_PASSWORD"])
        ).prefixKeys(with: ["audio-bridge"])
        var providers: [any ConfigProvider] = [
            InMemoryProvider(name: "command line", values: given.values), environmentProvider,
        ]
        if let file = given.configFile ?? environment["AUDIO_BRIDGE_CONFIG_FILE"] {
            providers.append(try await FileProvider<JSONSnapshot>(filePath: FilePath(file)))
        }
        let config = ConfigReader(providers: providers)
        var resolved = Resolved()
        for setting in table {
            try setting.read(config, setting.key, &resolved)
        }
        try resolved.finish()
        return resolved
    }

    /// The command line as typed values by key: `--key value`, `--key=value`, `--no-key`; `--config-file` apart.
    static func parse(_ arguments: [String]) throws -> (values: [AbsoluteConfigKey: ConfigValue], configFile: String?) {
        var values: [AbsoluteConfigKey: ConfigValue] = [:]
        var file: String?
        var rest = arguments[...]
        while let argument = rest.popFirst() {
            guard argument.hasPrefix("--") else {
                throw Invalid(description: "unexpected argument '\(argument)': settings are given as --key value")
            }
            var name = String(argument.dropFirst(2))
            var value: String?
            if let equals = name.firstIndex(of: "=") {
                value = String(name[name.index(after: equals)...])
                name = String(name[..<equals])
            }
            func takeValue() throws -> String {
                if let value { return value }
                guard let next = rest.popFirst() else { throw Invalid(description: "--\(name) needs a value") }
                return next
            }
            if name == configFile {
                file = try takeValue()
            } else if let setting = table.first(where: { $0.key == name }), case .value = setting.form {
                values[AbsoluteConfigKey([name])] = ConfigValue(.string(try takeValue()), isSecret: name == "password")
            } else if name.hasPrefix("no-"), let setting = table.first(where: { "no-\($0.key)" == name }),
                case .switchedOff = setting.form, value == nil
            {
                values[AbsoluteConfigKey([setting.key])] = ConfigValue(.bool(false), isSecret: false)
            } else {
                throw Invalid(description: "unknown option '\(argument)': accessory-bridge --help lists the settings")
            }
        }
        return (values, file)
    }

    /// `--help`'s list: each setting's option, environment variable, default and help.
    static var help: String {
        let defaults = Resolved()
        var lines = ["Settings (an option, or its environment variable, or its key in the --config-file JSON):", ""]
        for setting in table {
            var head = "  " + setting.flag
            if case .value(let placeholder) = setting.form { head += " <\(placeholder)>" }
            head += "  (\(setting.environmentVariable)"
            if case .switchedOff = setting.form { head += "=false" }
            head += ")"
            lines.append(head)
            var help = "      " + setting.help
            if let shown = setting.shown(defaults) { help += " (default: \(shown))" }
            lines.append(help)
        }
        lines.append("  --config-file <path>  (AUDIO_BRIDGE_CONFIG_FILE)")
        lines.append("      A JSON file of settings, keyed by their names: {\"topic-root\": \"audio\", …}.")
        return lines.joined(separator: "\n")
    }
}

// MARK: - Kinds of settings

extension Settings.Setting {
    /// A text value.
    static func text(_ key: String, _ path: WritableKeyPath<Settings.Resolved, String> & Sendable, _ help: String)
        -> Self
    {
        Self(
            key: key, form: .value(placeholder: "text"), help: help,
            read: { config, key, settings in
                if let text = config.string(forKey: ConfigKey([key])) { settings[keyPath: path] = text }
            },
            shown: { $0[keyPath: path] })
    }

    /// A text value with no default.
    static func optionalText(
        _ key: String, _ path: WritableKeyPath<Settings.Resolved, String?> & Sendable, _ help: String,
        secret: Bool = false
    ) -> Self {
        Self(
            key: key, form: .value(placeholder: secret ? "secret" : "text"), help: help,
            read: { config, key, settings in
                if let text = config.string(forKey: ConfigKey([key]), isSecret: secret) { settings[keyPath: path] = text }
            },
            shown: { _ in nil })
    }

    /// A value read from text by `parse`, which throws ``Settings/Invalid`` with a reason.
    static func parsed<Value>(
        _ key: String, _ path: WritableKeyPath<Settings.Resolved, Value> & Sendable, _ placeholder: String,
        _ help: String, parse: @escaping @Sendable (String) throws -> Value
    ) -> Self {
        Self(
            key: key, form: .value(placeholder: placeholder), help: help,
            read: { config, key, settings in
                if let text = try Self.text(config, key) { settings[keyPath: path] = try parse(text) }
            },
            shown: { "\($0[keyPath: path])" })
    }

    /// A number of seconds ≥ 0, which may have a fraction.
    static func seconds(
        _ key: String, _ path: WritableKeyPath<Settings.Resolved, Duration> & Sendable, _ help: String
    ) -> Self {
        Self(
            key: key, form: .value(placeholder: "seconds"), help: help,
            read: { config, key, settings in
                guard let text = try Self.text(config, key) else { return }
                guard let seconds = Double(text), seconds >= 0, seconds.isFinite else {
                    throw Settings.Invalid(description: "\(key) must be a number of seconds ≥ 0, not '\(text)'")
                }
                settings[keyPath: path] = .milliseconds(Int64(seconds * 1000))
            },
            shown: { settings in
                let duration = settings[keyPath: path]
                let seconds = duration / .seconds(1)
                return seconds == seconds.rounded() ? "\(Int64(seconds))" : "\(seconds)"
            })
    }

    /// A switch, on by default: `--no-key`, or `false` (also `0`, `no`) in the environment or the file.
    static func switchedOff(
        _ key: String, _ path: WritableKeyPath<Settings.Resolved, Bool> & Sendable, _ help: String
    ) -> Self {
        Self(
            key: key, form: .switchedOff, help: help,
            read: { config, key, settings in
                if let on = config.bool(forKey: ConfigKey([key])) {
                    settings[keyPath: path] = on
                    return
                }
                guard let text = try Self.text(config, key) else { return }
                guard let on = ["true": true, "1": true, "yes": true, "false": false, "0": false, "no": false][text.lowercased()]
                else { throw Settings.Invalid(description: "\(key) must be true or false, not '\(text)'") }
                settings[keyPath: path] = on
            },
            shown: { _ in nil })
    }

    /// A value as text wherever it comes from: a string, or a JSON number or boolean in the file.
    fileprivate static func text(_ config: ConfigReader, _ key: String) throws -> String? {
        let configKey = ConfigKey([key])
        if let text = config.string(forKey: configKey) { return text }
        if let number = config.double(forKey: configKey) {
            return number == number.rounded() ? "\(Int64(number))" : "\(number)"
        }
        return nil
    }
}
