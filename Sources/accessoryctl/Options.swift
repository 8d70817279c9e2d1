import AccessoryControl
import AccessoryModel
import AccessoryWire
import ArgumentParser
import Foundation
import Logging
import MQTTClient

/// How to reach the broker; the password can also come from ACCESSORYCTL_PASSWORD.
struct ConnectionOptions: ParsableArguments {
    @Option(help: "The broker: mqtt://host:port or mqtts://host:port.")
    var broker = "mqtt://127.0.0.1:1883"

    @Option(help: "The first topic levels of the contract.")
    var topicRoot = "audio"

    @Option(help: "The MQTT user name.")
    var username: String?

    @Option(help: "The MQTT password (or set ACCESSORYCTL_PASSWORD).")
    var password: String?

    @Option(help: "The PEM file of the CA that signs the broker's certificate.")
    var caFile: String?

    @Option(help: "The PEM file of a client certificate.")
    var certFile: String?

    @Option(help: "The PEM file of the client certificate's key.")
    var keyFile: String?

    @Option(help: "The payload format to send, and so to be sent (the bridge answers each in its own): json or protobuf.")
    var format: PayloadFormat = .json

    @Option(help: "Seconds to wait for the broker's connection, and for the bridge's answer.")
    var timeout: Double = 5

    @Option(
        help: ArgumentHelp(
            "A cluster of bridges' number of slots: hubs' and accessories' topics are then under R/slots/{slot} (see "
                + "`accessoryctl slot`); `bridge`: the count the bridge's layout says (`accessoryctl layout`).",
            valueName: "count|bridge"))
    var slots: SlotsArgument?

    /// ``timeout`` as a duration.
    var patience: Duration { .milliseconds(Int64(timeout * 1000)) }

    var root: TopicRoot {
        get throws {
            guard let root = TopicRoot(topicRoot) else {
                throw ValidationError("--topic-root must be \(TopicRoot.grammar)")
            }
            return root
        }
    }

    /// The cluster's slots, with `--slots` (`bridge`: once ``resolvingLayout()`` read them).
    var clusterSlots: ClusterSlots? {
        get throws {
            switch slots {
            case nil, .singleBridge?: return nil
            case .count(let count)?: return count
            case .bridge?: throw ValidationError("--slots bridge: the bridge's layout was not read")
            }
        }
    }

    /// These options with `--slots bridge` replaced by the count the bridge's retained layout says (a command
    /// that reads or writes a hub's or an accessory's topics calls it first).
    func resolvingLayout() async throws -> ConnectionOptions {
        guard case .bridge? = slots else { return self }
        let mqtt = try mqtt(clientID: ConnectionOptions.clientID("layout"))
        let root = try root
        let layout = try await connecting {
            try await BridgeLayout.read(mqtt: mqtt, topicRoot: root, timeout: patience, logger: Self.logger)
        }
        guard let layout else {
            throw fail("--slots bridge: no bridge's layout on \(Topic.bridgeLayout.name(under: root)) within \(timeout) s")
        }
        var resolved = self
        resolved.slots = layout.slots.map { .count($0) } ?? .singleBridge
        return resolved
    }

    /// The filter of every topic of `kind`: in a cluster, the hubs' and accessories' under every slot's root.
    func filter(_ kind: Topic.Kind) throws -> String {
        try clusterSlots == nil ? kind.filter(under: root) : kind.filterInEverySlot(under: root)
    }

    /// The root `topic` is under: in a cluster, its slot's (`R/slots/{n}`) when it is one's, else the root.
    func root(of topic: String) throws -> TopicRoot {
        let root = try root
        let head = root.rawValue + "/slots/"
        guard try clusterSlots != nil, topic.hasPrefix(head) else { return root }
        let number = topic.dropFirst(head.count).prefix { $0.isNumber }
        return TopicRoot(head + number) ?? root
    }

    func mqtt(clientID: String) throws -> MQTTConfiguration {
        let url = try BrokerURL(parsing: broker)
        var mqtt = MQTTConfiguration(clientID: clientID)
        mqtt.host = url.host
        mqtt.port = url.port
        mqtt.username = username
        mqtt.password = password ?? ProcessInfo.processInfo.environment["ACCESSORYCTL_PASSWORD"]
        if url.usesTLS || caFile != nil {
            guard let caFile else { throw ValidationError("\(url) uses TLS: give --ca-file") }
            mqtt.tls = .init(caFile: caFile, certificateFile: certFile, keyFile: keyFile)
        }
        return mqtt
    }

    /// Why connecting to the broker failed, in one line for a person, with the options to check; the command then
    /// ends with status 1.
    func failure(_ error: MQTTError) -> ExitCode {
        var text: String
        switch error.kind {
        case .notConnected, .invalidArgument:
            text = error.message
        default:
            text = "cannot connect to \(broker): \(error.message)"
            if let hint = error.hint { text += ": \(hint)" }
        }
        switch error.kind {
        case .connectionRefused: text += " (--username, and --password or ACCESSORYCTL_PASSWORD)"
        case .library: text += " (--ca-file, --cert-file, --key-file)"
        default: break
        }
        return fail(text)
    }

    /// Runs `body`, which makes or connects an MQTT client: its MQTTError becomes ``failure(_:)``.
    func connecting<T>(_ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch let error as MQTTError {
            throw failure(error)
        }
    }

    static var logger: Logger {
        var logger = Logger(label: "accessoryctl")
        logger.logLevel = .error
        return logger
    }

    static func clientID(_ role: String) -> String {
        "accessoryctl-\(role)-\(String(UInt32.random(in: .min ... .max), radix: 16))"
    }
}

/// A hub command's options: the connection and the hub to speak for.
struct HubOptions: ParsableArguments {
    @OptionGroup var connection: ConnectionOptions

    @Option(help: "The hub id to act as.")
    var hub = "hub-1"

    /// Connects as the hub, runs `body`, prints the outcome; an AudioAccessoryKit error exits with status 1.
    func run(_ body: (AccessoryHub) async throws(AccessoryControlError) -> Void) async throws {
        guard let hubID = HubID(hub) else { throw ValidationError("--hub must be \(IdentifierGrammar.description)") }
        let connection = try await connection.resolvingLayout()
        var options = AccessoryHub.Options()
        options.topicRoot = try connection.root
        options.slots = try connection.clusterSlots
        options.payloadFormat = connection.format
        options.timeout = connection.patience
        // A one-shot command speaks for the hub, not for its availability, nor for what the hub's process remembers
        // of its accessories (the bridge's rebirth requests), nor in the hub's count of its requests.
        options.announcesStatus = false
        options.answersRebirthRequests = false
        options.sequencesRequests = false
        let accessoryHub = try await connection.connecting {
            try AccessoryHub(
                hubID: hubID, mqtt: try connection.mqtt(clientID: ConnectionOptions.clientID(hub)), options: options,
                logger: ConnectionOptions.logger)
        }
        do {
            try await connection.connecting { try await accessoryHub.start(timeout: connection.patience) }
            try await body(accessoryHub)
            await accessoryHub.stop()
        } catch let exit as ExitCode {
            await accessoryHub.stop()
            throw exit
        } catch {
            await accessoryHub.stop()
            throw fail("\(error)")
        }
    }
}

extension PayloadFormat: ExpressibleByArgument {}

/// An accessory id argument.
struct AccessoryArgument: ExpressibleByArgument {
    let id: AccessoryID
    init?(argument: String) {
        guard let id = AccessoryID(argument) else { return nil }
        self.id = id
    }
}

/// A Bluetooth address argument: 12:34:56:78:9A:BC.
struct AddressArgument: ExpressibleByArgument {
    let address: BluetoothAddress
    init?(argument: String) {
        guard let address = BluetoothAddress(argument) else { return nil }
        self.address = address
    }
}

/// `audioSwitching,placement` (any of audioSwitching, placement, audioSpatialization, headTracking).
struct CapabilitiesArgument: ExpressibleByArgument {
    let capabilities: Capabilities
    init?(argument: String) {
        var capabilities: Capabilities = []
        for name in argument.split(separator: ",").map({ $0.trimmingCharacters(in: .whitespaces) }) where !name.isEmpty {
            guard let known = Capabilities.known.first(where: { $0.name.lowercased() == name.lowercased() }) else {
                return nil
            }
            capabilities.insert(known.capability)
        }
        self.capabilities = capabilities
    }
    init(_ capabilities: Capabilities) {
        self.capabilities = capabilities
    }
    /// How `--help` shows a default: as it is written on the command line.
    var defaultValueDescription: String {
        Capabilities.known.filter { capabilities.contains($0.capability) }.map(\.name).joined(separator: ",")
    }
}

/// `--slots`: a count, or `bridge` (read from the bridge's layout).
enum SlotsArgument: ExpressibleByArgument {
    case count(ClusterSlots)
    case bridge
    /// What `bridge` resolved to when the layout says a single bridge.
    case singleBridge

    init?(argument: String) {
        if argument == "bridge" {
            self = .bridge
        } else if let count = Int(argument).flatMap(ClusterSlots.init) {
            self = .count(count)
        } else {
            return nil
        }
    }
}

enum SwitchArgument: String, ExpressibleByArgument, CaseIterable {
    case on, off

    var isOn: Bool { self == .on }
}

/// An AudioComponentDescription in hex, `type:subtype:manufacturer[:flags:mask]` (`aaf:c0f:b05e`; `0x` is allowed).
struct AudioComponentArgument: ExpressibleByArgument {
    let description: AudioComponentDescription
    init?(argument: String) {
        let fields = argument.split(separator: ":", omittingEmptySubsequences: false).map { field in
            UInt32(field.hasPrefix("0x") || field.hasPrefix("0X") ? field.dropFirst(2) : field, radix: 16)
        }
        guard fields.count == 3 || fields.count == 5, fields.allSatisfy({ $0 != nil }) else { return nil }
        let values = fields.map { $0! }
        description = AudioComponentDescription(
            componentType: values[0], componentSubType: values[1], componentManufacturer: values[2],
            componentFlags: values.count == 5 ? values[3] : 0, componentFlagsMask: values.count == 5 ? values[4] : 0)
    }

    /// `description` as the argument writes it (`aaf:c0f:b05e`, with `:flags:mask` when either is set).
    static func written(_ description: AudioComponentDescription) -> String {
        var fields = [description.componentType, description.componentSubType, description.componentManufacturer]
        if description.componentFlags != 0 || description.componentFlagsMask != 0 {
            fields += [description.componentFlags, description.componentFlagsMask]
        }
        return fields.map { String($0, radix: 16) }.joined(separator: ":")
    }
}

/// `inEar`, `onHead`, `overTheEar`, `offHead`, or `none`.
struct PlacementArgument: ExpressibleByArgument {
    let placement: Placement?
    init?(argument: String) {
        if argument.lowercased() == "none" {
            placement = nil
            return
        }
        guard let placement = Placement.allCases.first(where: { "\($0)".dropFirst().lowercased() == argument.lowercased() })
        else { return nil }
        self.placement = placement
    }
    /// How `--help` shows a default: as it is written on the command line.
    var defaultValueDescription: String { placement.map { String("\($0)".dropFirst()) } ?? "none" }
}

/// Prints `error: <message>` on standard error; throw what it returns to end the command with status 1.
func fail(_ message: String) -> ExitCode {
    FileHandle.standardError.write(Data("error: \(message)\n".utf8))
    return ExitCode(1)
}
