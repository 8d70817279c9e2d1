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
/// | `R/sources/{source}/state` | playing device → bridge (retained) |
/// | `R/sources/{source}/commands` | bridge → playing device |
/// | `R/bridge/status` | bridge (its will says offline) |
public enum Topic: Hashable, Sendable, CustomStringConvertible {
    case telemetry(hub: HubID, accessory: AccessoryID)
    case result(hub: HubID, accessory: AccessoryID)
    case hubStatus(hub: HubID)
    case rebirth(hub: HubID)
    /// A response topic under the hub's own; `name` is the rest, one or more levels.
    case responses(hub: HubID, name: String)
    case accessoryState(accessory: AccessoryID)
    case sourceState(source: BluetoothAddress)
    case sourceCommands(source: BluetoothAddress)
    case bridgeStatus

    /// The kinds of topics, for subscriptions.
    public enum Kind: Hashable, Sendable, CaseIterable {
        case telemetry, result, hubStatus, rebirth, responses, accessoryState, sourceState, sourceCommands, bridgeStatus

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
            }
            return root.rawValue + "/" + levels
        }

        /// The filter matching the topics of this kind of one hub, such as `audio/hubs/hub-1/responses/#`.
        public func filter(under root: TopicRoot, hub: HubID) -> String {
            filter(under: root).replacingOccurrences(of: "/hubs/+/", with: "/hubs/\(hub)/")
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
        }
    }
}

/// A topic name that is not part of the contract, and why.
public struct TopicError: Error, Hashable, Sendable, CustomStringConvertible {
    public var topic: String
    public var reason: String

    public var description: String { "topic '\(topic)': \(reason)" }
}
