import AccessoryModel
import Foundation

/// A topic of the contract: what it is about, without its root. ``name(under:)`` builds it and
/// ``init(parsing:under:)`` reads it back.
///
/// | topic | from → to |
/// |---|---|
/// | `R/hubs/{hub}/accessories/{accessory}/telemetry` | hub → bridge |
/// | `R/hubs/{hub}/accessories/{accessory}/result` | bridge → hub |
/// | `R/hubs/{hub}/status` | hub (its will says offline) |
/// | `R/hubs/{hub}/rebirth` | bridge → hub: send everything about an accessory again |
/// | `R/hubs/{hub}/responses/{name}` | bridge → hub: results on the hub's MQTT 5 response topic (`name`: any levels) |
/// | `R/accessories/{accessory}/state` | bridge → everyone (retained) |
/// | `R/accessories/{accessory}/controls` | home automation → bridge: the person's controls |
/// | `R/accessories/{accessory}/controls/result` | bridge → home automation: the answer |
/// | `R/accessories/{accessory}/view` | bridge → home automation: the state in plain JSON (retained) |
/// | `R/accessories/{accessory}/events` | bridge → home automation: switch events in JSON |
/// | `R/hubs/{hub}/availability` | bridge → home automation: `online` / `offline` (retained) |
/// | `R/bridge/availability` | bridge → home automation: `online` / `offline` (retained; a will says offline) |
/// | `R/bridge/view` | bridge → home automation: its version and counts in JSON (retained) |
/// | `R/sources/{source}/state` | playing device → bridge (retained) |
/// | `R/sources/{source}/commands` | bridge → playing device |
/// | `R/bridge/status` | bridge (its will says offline) |
/// | `R/bridge/layout` | bridge → hubs: a single bridge's, or a cluster's slot count (retained; never under a slot) |
/// | `R/hubs/{hub}/accessories/{accessory}/headtracking` | bridge → hub: its head-tracking sessions (rule 13) |
/// | `R/sources/{host}/headtracking` | bridge → playing device: the head-tracking sessions it hosts |
/// | `R/sources/{host}/frames/{hub}/{accessory}` | hub → playing device: IMU frames, never through the bridge |
public enum Topic: Hashable, Sendable, CustomStringConvertible {
    case telemetry(hub: HubID, accessory: AccessoryID)
    case result(hub: HubID, accessory: AccessoryID)
    case hubStatus(hub: HubID)
    case rebirth(hub: HubID)
    /// A response topic under the hub's own; `name` is the rest, one or more levels.
    case responses(hub: HubID, name: String)
    case accessoryState(accessory: AccessoryID)
    case controls(accessory: AccessoryID)
    case controlsResult(accessory: AccessoryID)
    case accessoryView(accessory: AccessoryID)
    case accessoryEvents(accessory: AccessoryID)
    case hubAvailability(hub: HubID)
    case bridgeAvailability
    case bridgeView
    case sourceState(source: BluetoothAddress)
    case sourceCommands(source: BluetoothAddress)
    case bridgeStatus
    case bridgeLayout
    case headTracking(hub: HubID, accessory: AccessoryID)
    case hostHeadTracking(host: BluetoothAddress)
    case frames(host: BluetoothAddress, hub: HubID, accessory: AccessoryID)

    /// The kinds of topics, for subscriptions.
    public enum Kind: Hashable, Sendable, CaseIterable {
        case telemetry, result, hubStatus, rebirth, responses, accessoryState, sourceState, sourceCommands, bridgeStatus
        case controls, controlsResult, accessoryView, accessoryEvents, hubAvailability, bridgeAvailability, bridgeView
        case bridgeLayout, headTracking, hostHeadTracking, frames

        /// The filter matching every topic of this kind, such as `audio/hubs/+/accessories/+/telemetry`.
        public func filter(under root: TopicRoot) -> String {
            let levels: String
            switch self {
            case .telemetry: levels = "hubs/+/accessories/+/telemetry"
            case .result: levels = "hubs/+/accessories/+/result"
            case .hubStatus: levels = "hubs/+/status"
            case .rebirth: levels = "hubs/+/rebirth"
            case .responses: levels = "hubs/+/responses/#"
            case .accessoryState: levels = "accessories/+/state"
            case .sourceState: levels = "sources/+/state"
            case .sourceCommands: levels = "sources/+/commands"
            case .bridgeStatus: levels = "bridge/status"
            case .bridgeLayout: levels = "bridge/layout"
            case .controls: levels = "accessories/+/controls"
            case .controlsResult: levels = "accessories/+/controls/result"
            case .accessoryView: levels = "accessories/+/view"
            case .accessoryEvents: levels = "accessories/+/events"
            case .hubAvailability: levels = "hubs/+/availability"
            case .bridgeAvailability: levels = "bridge/availability"
            case .bridgeView: levels = "bridge/view"
            case .headTracking: levels = "hubs/+/accessories/+/headtracking"
            case .hostHeadTracking: levels = "sources/+/headtracking"
            case .frames: levels = "sources/+/frames/+/+"
            }
            return root.rawValue + "/" + levels
        }

        /// The filter matching the topics of this kind of one hub, such as `audio/hubs/hub-1/responses/#`; for
        /// ``frames``, the frames the hub sends to any host, `audio/sources/+/frames/hub-1/+`.
        public func filter(under root: TopicRoot, hub: HubID) -> String {
            if self == .frames { return "\(root.rawValue)/sources/+/frames/\(hub)/+" }
            return filter(under: root).replacingOccurrences(of: "/hubs/+/", with: "/hubs/\(hub)/")
        }

        /// The filter matching the topics of this kind of one playing device, such as
        /// `audio/sources/123456789abc/frames/+/+`.
        public func filter(under root: TopicRoot, source: BluetoothAddress) -> String {
            filter(under: root).replacingOccurrences(of: "/sources/+/", with: "/sources/\(source.topicID)/")
        }
    }

    public var kind: Kind {
        switch self {
        case .telemetry: .telemetry
        case .result: .result
        case .hubStatus: .hubStatus
        case .rebirth: .rebirth
        case .responses: .responses
        case .accessoryState: .accessoryState
        case .sourceState: .sourceState
        case .sourceCommands: .sourceCommands
        case .bridgeStatus: .bridgeStatus
        case .bridgeLayout: .bridgeLayout
        case .controls: .controls
        case .controlsResult: .controlsResult
        case .accessoryView: .accessoryView
        case .accessoryEvents: .accessoryEvents
        case .hubAvailability: .hubAvailability
        case .bridgeAvailability: .bridgeAvailability
        case .bridgeView: .bridgeView
        case .headTracking: .headTracking
        case .hostHeadTracking: .hostHeadTracking
        case .frames: .frames
        }
    }

    /// The topic name under `root`.
    public func name(under root: TopicRoot) -> String {
        "\(root.rawValue)/\(self)"
    }

    /// The levels after the root: `hubs/hub-1/accessories/headphones/telemetry`.
    public var description: String {
        switch self {
        case .telemetry(let hub, let accessory): "hubs/\(hub)/accessories/\(accessory)/telemetry"
        case .result(let hub, let accessory): "hubs/\(hub)/accessories/\(accessory)/result"
        case .hubStatus(let hub): "hubs/\(hub)/status"
        case .rebirth(let hub): "hubs/\(hub)/rebirth"
        case .responses(let hub, let name): "hubs/\(hub)/responses/\(name)"
        case .accessoryState(let accessory): "accessories/\(accessory)/state"
        case .sourceState(let source): "sources/\(source.topicID)/state"
        case .sourceCommands(let source): "sources/\(source.topicID)/commands"
        case .bridgeStatus: "bridge/status"
        case .bridgeLayout: "bridge/layout"
        case .controls(let accessory): "accessories/\(accessory)/controls"
        case .controlsResult(let accessory): "accessories/\(accessory)/controls/result"
        case .accessoryView(let accessory): "accessories/\(accessory)/view"
        case .accessoryEvents(let accessory): "accessories/\(accessory)/events"
        case .hubAvailability(let hub): "hubs/\(hub)/availability"
        case .bridgeAvailability: "bridge/availability"
        case .bridgeView: "bridge/view"
        case .headTracking(let hub, let accessory): "hubs/\(hub)/accessories/\(accessory)/headtracking"
        case .hostHeadTracking(let host): "sources/\(host.topicID)/headtracking"
        case .frames(let host, let hub, let accessory): "sources/\(host.topicID)/frames/\(hub)/\(accessory)"
        }
    }
}

extension TopicRoot {
    /// The marker a bridge sends itself at start-up, `R/bridge/rebuild/{instance}`: once it comes back, every
    /// retained state has come before it.
    public func rebuildMarker(_ instance: String) -> String {
        "\(rawValue)/bridge/rebuild/\(instance)"
    }

    /// The filter of every bridge's start-up markers.
    public var rebuildMarkers: String {
        rebuildMarker("#")
    }
}

/// A topic name that is not part of the contract, and why.
public struct TopicError: Error, Hashable, Sendable, CustomStringConvertible {
    public var topic: String
    public var reason: String

    public var description: String { "topic '\(topic)': \(reason)" }
}
