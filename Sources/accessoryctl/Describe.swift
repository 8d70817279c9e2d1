import AccessoryModel
import AccessoryWire
import MQTTClient

/// One line a person can read for each message of the contract.
enum Describe {
    static let codec = WireCodec()

    static func message(_ message: MQTTMessage, root: TopicRoot) -> String {
        guard let topic = try? Topic(parsing: message.topic, under: root) else {
            return "\(message.topic): \(message.payload.count) bytes"
        }
        do {
            let format = try PayloadFormat.detect(contentType: message.properties.contentType, payload: message.payload)
            switch topic {
            case .sourceCommands(let source):
                return command(try codec.decode(Audioaccessory_V1_SwitchCommand.self, from: message.payload, format: format), source: source)
            case .result(let hub, let accessory):
                let result = try codec.decode(Audioaccessory_V1_RequestResult.self, from: message.payload, format: format)
                return "result  \(hub)/\(accessory) \(Self.result(result))"
            case .responses(let hub, _):
                let result = try codec.decode(Audioaccessory_V1_RequestResult.self, from: message.payload, format: format)
                return "result  \(hub) \(Self.result(result))"
            case .accessoryState:
                return state(try codec.decode(Audioaccessory_V1_AccessoryState.self, from: message.payload, format: format))
            case .rebirth(let hub):
                let request = try codec.decode(Audioaccessory_V1_RebirthRequest.self, from: message.payload, format: format)
                return "rebirth \(hub)/\(request.accessoryID) after seq \(request.lastSequence): \(request.reason)"
            case .hubStatus(let hub):
                let status = try codec.decode(Audioaccessory_V1_HubStatus.self, from: message.payload, format: format)
                return "hub     \(hub) \(status.online ? "online" : "offline")"
            case .bridgeStatus:
                let status = try codec.decode(Audioaccessory_V1_BridgeStatus.self, from: message.payload, format: format)
                return "bridge  \(status.online ? "online" : "offline") \(status.version)"
            case .sourceState(let source):
                let state = try codec.decode(Audioaccessory_V1_SourceState.self, from: message.payload, format: format)
                let report = try state.report()
                return "source  \(source) \(report.activity.map(\.description) ?? "-")"
                    + (report.routedAccessory.map { " routed to \($0)" } ?? "")
            case .telemetry(let hub, let accessory):
                let telemetry = try codec.decode(Audioaccessory_V1_AccessoryTelemetry.self, from: message.payload, format: format)
                return "request \(hub)/\(accessory) seq \(telemetry.sequence): \((try? telemetry.request(for: accessory)).map { "\($0)" } ?? "invalid")"
            }
        } catch {
            return "\(message.topic): unreadable (\(error))"
        }
    }

    static func result(_ result: Audioaccessory_V1_RequestResult) -> String {
        let outcome = result.controlError.map { "\($0)" } ?? (result.error == .unspecified ? result.message : "ok")
        return "\(result.requestID.isEmpty ? "-" : result.requestID) seq \(result.sequence): "
            + (result.duplicate ? "duplicate, " : "") + outcome
    }

    static func command(_ command: Audioaccessory_V1_SwitchCommand, source: BluetoothAddress) -> String {
        guard let model = try? command.command(for: source) else { return "command \(source): invalid \(command)" }
        return "command \(model.description) #\(model.sequence)"
    }

    static func state(_ state: Audioaccessory_V1_AccessoryState) -> String {
        let configuration = (try? state.configuration.configuration()) ?? .empty
        var parts = [
            "state   \(state.accessoryID)", "hub \(state.hubID)",
            (try? state.registration.registration(field: "registration")).map(\.description) ?? "unknown",
            "\(configuration.deviceCapabilities)",
            configuration.devicePlacement.map(\.description) ?? "no placement",
            "sources \(SourcePair(configuration.audioSources))",
            "routed " + (BluetoothAddress(bytes: state.routedSource)?.description ?? "none"),
            "seq \(state.lastSequence)",
        ]
        if state.stale { parts.append("STALE") }
        parts += state.diagnostics.map { "⚠ \($0)" }
        return parts.joined(separator: ", ")
    }
}
