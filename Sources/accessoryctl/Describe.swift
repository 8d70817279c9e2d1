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
            let payload = message.payload
            let now = WallClock.system.now
            switch topic {
            case .sourceCommands(let source):
                let command = try codec.decode(SwitchCommand.self, from: payload, format: format, source: source)
                return "command \(command.description) #\(command.sequence)"
            case .result(let hub, let accessory):
                let result = try codec.decode(RequestResult.self, from: payload, format: format, at: now)
                return "result  \(hub)/\(accessory) \(Self.result(result))"
            case .responses(let hub, _):
                let result = try codec.decode(RequestResult.self, from: payload, format: format, at: now)
                return "result  \(hub) \(Self.result(result))"
            case .accessoryState:
                return state(try codec.decode(AccessoryState.self, from: payload, format: format, at: now))
            case .rebirth(let hub):
                let request = try codec.decode(RebirthRequest.self, from: payload, format: format)
                return "rebirth \(hub)/\(request.accessory) after seq \(request.lastSequence): \(request.reason)"
            case .hubStatus(let hub):
                let status = try codec.decode(HubStatus.self, from: payload, format: format)
                return "hub     \(hub) \(status.online ? "online" : "offline")"
            case .bridgeStatus:
                let status = try codec.decode(BridgeStatus.self, from: payload, format: format)
                return "bridge  \(status.online ? "online" : "offline") \(status.version)"
            case .bridgeLayout:
                return layout(try codec.decode(BridgeLayout.self, from: payload, format: format))
            case .sourceState(let source):
                let report = try codec.decode(SourceReport.self, from: payload, format: format)
                return "source  \(source) \(report.activity.map(\.description) ?? "-")"
                    + (report.routedAccessory.map { " routed to \($0)" } ?? "")
            case .controls(let accessory):
                let request = try codec.decode(ControlsRequest.self, from: payload, format: format)
                let switching = request.controls.automaticSwitching.map { $0 ? "automatic" : "off" } ?? "-"
                let pin: String =
                    switch request.controls.pin {
                    case nil: "-"
                    case .automatic?: "automatic"
                    case .source(let source)?: source.description
                    }
                return "controls \(accessory) switching \(switching), pinned \(pin)"
            case .controlsResult(let accessory):
                let result = try codec.decode(RequestResult.self, from: payload, format: format, at: now)
                return "result  controls of \(accessory) \(Self.result(result))"
            case .headTracking, .hostHeadTracking:
                let (event, hub) = try codec.decode(HeadTrackingEvent.self, from: payload, format: format)
                return "session \(hub.map { "\($0)/" } ?? "")\(event.session.accessory) \(Self.headTracking(event))"
            case .frames(let host, let hub, let accessory):
                guard let frame = HeadTrackingFrame(decoding: payload) else { return "frame   \(hub)/\(accessory) unreadable" }
                return "frame   \(hub)/\(accessory) -> \(host) #\(frame.sequence) \(frame.data.count) bytes"
            case .accessoryView, .accessoryEvents, .hubAvailability, .bridgeAvailability, .bridgeView:
                return "\(topic)  \(String(decoding: payload, as: UTF8.self))"
            case .telemetry(let hub, let accessory):
                let telemetry = try codec.readTelemetry(from: payload, format: format, for: accessory)
                let request = (try? telemetry.request.get()).map { "\($0)" } ?? "invalid"
                return "request \(hub)/\(accessory) seq \(telemetry.sequence): \(request)"
            }
        } catch {
            return "\(message.topic): unreadable (\(error))"
        }
    }


    /// `layout  64 slots (bridge 0.1.0)`, or `layout  a single bridge (bridge 0.1.0)`.
    static func layout(_ layout: BridgeLayout) -> String {
        "layout  \(layout.slots.map(\.description) ?? "a single bridge") (bridge \(layout.version))"
    }

    /// `activated 0f3c… on 12:34:56:78:9A:BC, head tracking on (routed) #1795…`.
    static func headTracking(_ event: HeadTrackingEvent) -> String {
        let session = event.session
        return "\(event.kind) \(session.id.description.prefix(8))… on \(session.host), head tracking "
            + "\(session.isHeadTrackingActive ? "on" : "off") (\(event.reason)) #\(session.order.sequence)"
    }
    static func result(_ result: RequestResult) -> String {
        let outcome: String =
            switch result.outcome {
            case .succeeded: "ok"
            case .failed(let error): "\(error)"
            case .notKept(let reason): reason
            }
        return "\(result.requestID.isEmpty ? "-" : result.requestID) seq \(result.sequence): "
            + (result.duplicate ? "duplicate, " : "") + outcome
    }

    static func state(_ state: AccessoryState) -> String {
        let accessory = state.accessory
        let configuration = accessory.configuration
        var parts = [
            "state   \(accessory.id)", "hub \(accessory.hub)", accessory.registration.description,
            "\(configuration.deviceCapabilities)",
            configuration.devicePlacement.map(\.description) ?? "no placement",
            "sources \(SourcePair(configuration.audioSources))",
            "routed " + (state.routedSource?.description ?? "none"),
        ]
        // iOS 27's half, where the accessory has it.
        if let description = configuration.spatialExtensionDescription {
            parts.append("spatial extension \(AudioComponentArgument.written(description))")
        }
        if let session = state.headTracking {
            parts.append(
                "head tracking session on \(session.host), head tracking \(session.isHeadTrackingActive ? "on" : "off")")
        }
        parts.append("seq \(accessory.lastSequence)")
        if accessory.isStale { parts.append("STALE") }
        parts += accessory.diagnostics.map { "⚠ \($0)" }
        return parts.joined(separator: ", ")
    }
}
