import AccessoryModel
import AccessoryWire

/// What home automation reads: plain JSON with readable values (`on_head`, `12:34:56:78:9A:BC`, `ON`), not protobuf
/// or its JSON mapping. Home Assistant, openHAB and Node-RED read these; the protobuf contract for hubs and devices is
/// unchanged.
enum HomeAutomationJSON {
    /// `R/accessories/{a}/view`: an accessory as home automation sees it.
    static func view(_ state: AccessoryState) -> [UInt8] {
        let accessory = state.accessory
        let configuration = accessory.configuration
        let problems = accessory.diagnostics.map(\.description)
        var json = JSONObjectWriter()
        json.field("accessory", accessory.id.rawValue)
        json.field("automatic_switching", accessory.automaticSwitching ? "ON" : "OFF")
        json.field("diagnostics", problems)
        if accessory.hardwareCapabilities.contains(.headTracking) {
            // Rule 13: ON while a session streams (in force, the host's Head Tracking on), and with which host.
            let session = state.headTracking
            json.field("head_tracking", session?.isHeadTrackingActive == true ? "ON" : "OFF")
            json.field("head_tracking_host", session?.host.description ?? "none")
        }
        json.field("hub", accessory.hub.rawValue)
        json.field("model", accessory.model)
        json.field("name", accessory.name)
        json.field("pinned_source", accessory.pinnedSource?.description ?? "automatic")
        json.field("placement", configuration.devicePlacement.map(placement) ?? "unknown")
        json.field("problem", problems.isEmpty ? "OFF" : "ON")
        json.field("registration", accessory.registration.description)
        json.field("routed_source", state.routedSource?.description ?? "none")
        json.field("sources", configuration.audioSources.map(\.description))
        json.field("stale", accessory.isStale)
        json.field("updated_at_unix_ms", accessory.updatedAt.unixMilliseconds)
        json.field("worn", RoutingAccessory(accessory).isWorn ? "ON" : "OFF")
        return json.finish()
    }

    /// `R/accessories/{a}/events`: a switch command the bridge issued, as an event of the accessory.
    static func event(_ command: SwitchCommand) -> [UInt8] {
        var json = JSONObjectWriter(capacity: 192)
        json.field("at_unix_ms", command.issuedAt.unixMilliseconds)
        json.field("command_id", command.id)
        json.field("event_type", action(command.action))
        json.field("reason", reason(command.reason))
        json.field("sequence", command.sequence)
        json.field("source", command.source.description)
        return json.finish()
    }

    /// `R/accessories/{a}/events`: what became of its head-tracking session (rule 13), as an event of the accessory.
    static func event(_ event: HeadTrackingEvent) -> [UInt8] {
        var json = JSONObjectWriter(capacity: 192)
        json.field("at_unix_ms", event.issuedAt.unixMilliseconds)
        json.field("event_type", headTrackingEventType(event.kind))
        json.field("head_tracking", event.kind != .invalidated && event.session.isHeadTrackingActive ? "ON" : "OFF")
        json.field("reason", snakeCase(event.reason.rawValue))
        json.field("sequence", event.session.order.sequence)
        json.field("source", event.session.host.description)
        return json.finish()
    }

    static func headTrackingEventType(_ kind: HeadTrackingEvent.Kind) -> String {
        headTrackingEventPrefix + kind.rawValue
    }

    /// What every head-tracking event type starts with, and no switch event's does: the two event entities that read
    /// an accessory's events topic tell theirs apart by it.
    static let headTrackingEventPrefix = "head_tracking_"

    static let headTrackingEventTypes = HeadTrackingEvent.Kind.allCases.map(headTrackingEventType)

    /// `routeMoved` → `route_moved`.
    static func snakeCase(_ name: String) -> String {
        name.reduce(into: "") { text, character in
            if character.isUppercase { text += "_" + character.lowercased() } else { text.append(character) }
        }
    }

    static let placements = ["in_ear", "on_head", "over_the_ear", "off_head", "unknown"]
    static let registrations = Registration.allCases.map(\.description)
    static let actions = SwitchCommand.Action.allCases.map(action)

    static func placement(_ placement: Placement) -> String {
        switch placement {
        case .inEar: "in_ear"
        case .onHead: "on_head"
        case .overTheEar: "over_the_ear"
        case .offHead: "off_head"
        }
    }

    static func action(_ action: SwitchCommand.Action) -> String {
        switch action {
        case .routeToAccessory: "route_to_accessory"
        case .pause: "pause"
        case .resume: "resume"
        case .release: "release"
        }
    }

    static func reason(_ reason: SwitchCommand.Reason) -> String {
        reason.description.lowercased()
    }
}
