import AccessoryModel
import AccessoryWire
import Foundation

/// What an accessory's discovery config shows: everything ``HomeAssistantDiscovery/accessoryConfig(_:)`` reads, and
/// nothing else, as one value. A config is published again exactly when this changes: a field added here is compared
/// too, and the config cannot show what is not here.
public struct AccessoryDevice: Hashable, Sendable {
    public var id: AccessoryID
    public var name: String
    public var model: String
    public var hub: HubID
    public var sources: [BluetoothAddress]
    public var pinnedSource: BluetoothAddress?
    /// Its hardware can track heads: it has the head-tracking entities (rule 13), from its pairing on.
    public var tracksHeads: Bool

    public init(_ state: AccessoryState) {
        let accessory = state.accessory
        id = accessory.id
        name = accessory.name
        model = accessory.model
        hub = accessory.hub
        sources = accessory.configuration.audioSources
        pinnedSource = accessory.pinnedSource
        tracksHeads = accessory.hardwareCapabilities.contains(.headTracking)
    }
}

/// Home Assistant MQTT discovery, device-based (one retained `{prefix}/device/{id}/config` per device with its
/// components, the format Home Assistant reads since 2024.11): one device per accessory, per hub and for the bridge.
/// Every id is derived from the topic root and the accessory's or hub's id, so it never changes.
///
/// A cluster's slot puts its configs under a level of their own, Home Assistant's optional node id
/// (`{prefix}/device/{slot's base}/{id}/config`), so that a slot taken over reads back its own configs only, not the
/// whole fleet's; Home Assistant reads both forms alike. Its accessories' and hubs' ids are the fleet's (derived from
/// the cluster's root, not the slot's), so that a reshard that moves them to another slot leaves them the same
/// devices and entities: the reshard hands their entities over from the old config topic to the new one
/// (``handOverPayload``). Only the slot's own device, the bridge's, is named by the slot.
public struct HomeAssistantDiscovery: Sendable {
    public let prefix: String
    public let root: TopicRoot
    /// `aab_{root}` of the fleet's root (see ``identifier(of:)``): the ids of its accessories and hubs start with it.
    let base: String
    /// `aab_{root}` of this bridge's or slot's own root: its node level (a slot's), and the bridge device's id.
    let ownBase: String
    /// Where this bridge's config topics start: `{prefix}/device/`, then, for a cluster's slot, a node level named
    /// by its ``ownBase``.
    private let configTopicHead: String
    /// Home Assistant's birth and will, `{prefix}/status` (compared with every inbound message's topic).
    let statusTopic: String
    /// A cluster's slot's node level (its ``ownBase``): the level before the object id in its config topics. `nil` for
    /// one bridge, whose config topics have none.
    public let node: String?

    /// - Parameters:
    ///   - root: This bridge's topic root, or a cluster's slot's.
    ///   - fleet: For a cluster's slot, the cluster's root: the configs go under a node level named by `root`, and
    ///     the accessories' and hubs' ids are derived from `fleet`.
    public init(prefix: String, root: TopicRoot, fleet: TopicRoot? = nil) {
        self.prefix = prefix
        self.root = root
        ownBase = Self.identifier(of: root)
        base = fleet.map(Self.identifier(of:)) ?? ownBase
        node = fleet == nil ? nil : ownBase
        configTopicHead = node.map { "\(prefix)/device/\($0)/" } ?? "\(prefix)/device/"
        statusTopic = "\(prefix)/status"
    }

    /// `aab_{root}`: the root with every character outside `A–Z a–z 0–9 _ -` as `_` (Home Assistant's grammar for a
    /// discovery id, which is one topic level).
    static func identifier(of root: TopicRoot) -> String {
        let level = root.rawValue.utf8.map { IdentifierGrammar.isAllowed($0) ? $0 : UInt8(ascii: "_") }
        return "aab_" + String(decoding: level, as: UTF8.self)
    }

    /// An accessory's id: `{base}_{id}`, or `{base}_acc_{id}` for an id that would read as another device's (`bridge`,
    /// a hub's `hub_…`, a slot's own `slots_…`) or as one so escaped (`acc_…`): two devices never share an id.
    func accessoryID(_ id: AccessoryID) -> String {
        let raw = id.rawValue
        let escaped = raw == "bridge" || Self.escapedPrefixes.contains { raw.hasPrefix($0) }
        return escaped ? "\(base)_acc_\(raw)" : "\(base)_\(raw)"
    }
    private static let escapedPrefixes = ["acc_", "hub_", "slots_"]
    func hubID(_ hub: HubID) -> String { "\(base)_hub_\(hub.rawValue)" }
    var bridgeID: String { "\(ownBase)_bridge" }

    func configTopic(_ objectID: String) -> String { "\(configTopicHead)\(objectID)/config" }
    /// Where an accessory's config is retained.
    public func configTopic(of accessory: AccessoryID) -> String { configTopic(accessoryID(accessory)) }
    /// Where a hub's config is retained.
    public func configTopic(of hub: HubID) -> String { configTopic(hubID(hub)) }
    /// What the start-up reads back: every config of one bridge's form, or only a slot's own.
    public var configFilter: String { "\(configTopicHead)+/config" }
    /// The node level of a config topic of a cluster's slot's form, `{prefix}/device/{node}/{object}/config` (a
    /// slot's ``node``); `nil` for a topic of another form.
    public static func node(ofConfigTopic topic: String) -> String? {
        let levels = topic.split(separator: "/", omittingEmptySubsequences: false)
        guard levels.count >= 5, levels[levels.count - 4] == "device", levels.last == "config" else { return nil }
        return String(levels[levels.count - 3])
    }

    /// Home Assistant's "discovery migration": published on a config's topic, it unloads the device's entities but
    /// keeps them in Home Assistant's registries, and the config then published under another topic with the same
    /// ids takes them over, with their entity ids, names, areas and history. An empty retained message on the old
    /// topic then removes nothing (Home Assistant logs that it had nothing to clean up there).
    public static let handOverPayload = Array(#"{"migrate_discovery":true}"#.utf8)

    /// The object id a config topic names, when it is one of this bridge's (for the start-up clean-up).
    func ownObjectID(ofConfigTopic topic: String) -> String? {
        let head = configTopicHead, tail = "/config"
        guard topic.hasPrefix(head), topic.hasSuffix(tail), topic.utf8.count > head.utf8.count + tail.utf8.count else {
            return nil
        }
        let objectID = String(topic.dropFirst(head.count).dropLast(tail.count))
        return objectID.hasPrefix(base + "_") && !objectID.contains("/") ? objectID : nil
    }

    /// A device this bridge announces.
    public enum ConfiguredDevice: Hashable, Sendable {
        case accessory(AccessoryID)
        case hub(HubID)
        case bridge
    }

    /// The device one of this bridge's (or slot's) config topics is for; `nil` for a topic that is not one of its.
    public func device(ofConfigTopic topic: String) -> ConfiguredDevice? {
        guard let objectID = ownObjectID(ofConfigTopic: topic) else { return nil }
        if objectID == bridgeID { return .bridge }
        let rest = objectID.dropFirst(base.count + 1)
        if rest.hasPrefix("hub_") { return HubID(rest.dropFirst(4)).map { .hub($0) } }
        return AccessoryID(rest.hasPrefix("acc_") ? rest.dropFirst(4) : rest).map { .accessory($0) }
    }

    /// Compact, key-sorted JSON bytes of a config: the same config always gives the same bytes.
    static func payload(_ config: [String: Any]) -> [UInt8] {
        JSONObjectWriter.document(config)
    }

    private var origin: [String: Any] {
        ["name": "AudioAccessoryBridge", "sw": Release.version]
    }

    private func topic(_ topic: Topic) -> String { topic.name(under: root) }

    /// A component of `device`: its platform, a unique id derived from the device's, and QoS 1 (Home Assistant
    /// does not inherit a device-level `qos`).
    private static func component(of device: String, _ name: String, _ platform: String, _ options: [String: Any])
        -> [String: Any]
    {
        options.merging(["p": platform, "unique_id": "\(device)_\(name)", "qos": 1]) { $1 }
    }

    /// The template of an event entity of an accessory's events topic, which carries its switch events and its
    /// head-tracking events: the other kind's payloads render empty, which Home Assistant ignores (an event type not
    /// in the entity's list would be a warning in its log for every event).
    static func events(headTracking: Bool) -> String {
        let theirs = "value_json.event_type.startswith('\(HomeAutomationJSON.headTrackingEventPrefix)')"
        return headTracking ? "{{ value if \(theirs) else '' }}" : "{{ '' if \(theirs) else value }}"
    }

    /// An accessory's device and its components, from what it shows alone.
    func accessoryConfig(_ accessory: AccessoryDevice) -> [String: Any] {
        let id = accessoryID(accessory.id)
        let view = topic(.accessoryView(accessory: accessory.id))
        let controls = topic(.controls(accessory: accessory.id))
        let events = topic(.accessoryEvents(accessory: accessory.id))
        let sources = accessory.sources.map(\.description)
        var pinOptions = ["automatic"] + sources
        if let pinned = accessory.pinnedSource?.description, !pinOptions.contains(pinned) { pinOptions.append(pinned) }
        func component(_ name: String, _ platform: String, _ options: [String: Any]) -> (String, [String: Any]) {
            (name, Self.component(of: id, name, platform, options))
        }
        var components: [(String, [String: Any])] = [
            component("worn", "binary_sensor", [
                "name": "Worn", "icon": "mdi:headphones", "value_template": "{{ value_json.worn }}",
            ]),
            component("placement", "sensor", [
                "name": "Placement", "device_class": "enum", "options": HomeAutomationJSON.placements,
                "value_template": "{{ value_json.placement }}",
            ]),
            component("routed_source", "sensor", [
                "name": "Playing device", "icon": "mdi:speaker-wireless",
                "value_template": "{{ value_json.routed_source }}",
            ]),
            component("registration", "sensor", [
                "name": "Registration", "device_class": "enum", "options": HomeAutomationJSON.registrations,
                "entity_category": "diagnostic", "value_template": "{{ value_json.registration }}",
            ]),
            component("automatic_switching", "switch", [
                "name": "Automatic switching", "command_topic": controls, "icon": "mdi:swap-horizontal",
                "payload_on": #"{"switching":"SWITCHING_AUTOMATIC"}"#, "payload_off": #"{"switching":"SWITCHING_OFF"}"#,
                "state_on": "ON", "state_off": "OFF", "value_template": "{{ value_json.automatic_switching }}",
            ]),
            component("pinned_source", "select", [
                "name": "Pinned playing device", "command_topic": controls, "options": pinOptions,
                "command_template": #"{"pinnedSource":"{{ value }}"}"#, "icon": "mdi:pin",
                "value_template": "{{ value_json.pinned_source }}",
            ]),
            component("switch_event", "event", [
                "name": "Switch event", "state_topic": events, "event_types": HomeAutomationJSON.actions,
                "icon": "mdi:swap-horizontal-circle", "value_template": Self.events(headTracking: false),
            ]),
            component("problem", "binary_sensor", [
                "name": "Problem", "device_class": "problem", "entity_category": "diagnostic",
                "value_template": "{{ value_json.problem }}", "json_attributes_topic": view,
                "json_attributes_template": "{{ {'diagnostics': value_json.diagnostics} | tojson }}",
            ]),
        ]
        if accessory.tracksHeads {
            // Rule 13: whether the head-tracking session streams (and to which host), and its news as events.
            components.append(
                component("head_tracking", "binary_sensor", [
                    "name": "Head tracking", "icon": "mdi:head-sync-outline",
                    "value_template": "{{ value_json.head_tracking }}", "json_attributes_topic": view,
                    "json_attributes_template": "{{ {'host': value_json.head_tracking_host} | tojson }}",
                ]))
            components.append(
                component("head_tracking_event", "event", [
                    "name": "Head tracking event", "state_topic": events,
                    "event_types": HomeAutomationJSON.headTrackingEventTypes, "icon": "mdi:head-sync",
                    "value_template": Self.events(headTracking: true),
                ]))
        }
        // Device triggers, for automations such as "when the headphones take over, dim the lights".
        for action in HomeAutomationJSON.actions {
            components.append(
                component("trigger_\(action)", "device_automation", [
                    "automation_type": "trigger", "topic": events, "type": action, "subtype": "switch",
                    "value_template": "{{ value_json.event_type }}", "payload": action,
                ]))
        }
        return [
            "dev": [
                "ids": [id], "name": accessory.name.isEmpty ? accessory.id.rawValue : accessory.name,
                "mdl": accessory.model.isEmpty ? "audio accessory" : accessory.model, "mf": "AudioAccessoryBridge",
                "via_device": hubID(accessory.hub),
            ] as [String: Any],
            "o": origin,
            "availability": [
                ["topic": topic(.bridgeAvailability)], ["topic": topic(.hubAvailability(hub: accessory.hub))],
            ],
            "availability_mode": "all",
            "state_topic": view,
            "cmps": Dictionary(uniqueKeysWithValues: components),
        ]
    }

    /// A hub's device: whether it is connected.
    func hubConfig(_ hub: HubID) -> [String: Any] {
        let id = hubID(hub)
        return [
            "dev": ["ids": [id], "name": "Hub \(hub)", "mf": "AudioAccessoryBridge", "via_device": bridgeID] as [String: Any],
            "o": origin,
            "availability": [["topic": topic(.bridgeAvailability)]],
            "cmps": [
                "connectivity": Self.component(of: id, "connectivity", "binary_sensor", [
                    "name": "Connectivity", "device_class": "connectivity", "state_topic": topic(.hubAvailability(hub: hub)),
                    "payload_on": "online", "payload_off": "offline",
                ])
            ],
        ]
    }

    /// The bridge's device: whether it is up, its version, and counts.
    func bridgeConfig() -> [String: Any] {
        let view = topic(.bridgeView)
        func count(_ name: String, _ label: String) -> [String: Any] {
            Self.component(of: bridgeID, name, "sensor", [
                "name": label, "state_topic": view, "state_class": "measurement",
                "value_template": "{{ value_json.\(name) }}", "availability_topic": topic(.bridgeAvailability),
            ])
        }
        return [
            "dev": [
                "ids": [bridgeID], "name": "AudioAccessoryBridge (\(root))", "mf": "AudioAccessoryBridge",
                "sw": Release.version,
            ] as [String: Any],
            "o": origin,
            "cmps": [
                // No availability of its own: when the bridge is gone this shows "off", not "unavailable".
                "connectivity": Self.component(of: bridgeID, "connectivity", "binary_sensor", [
                    "name": "Connectivity", "device_class": "connectivity", "state_topic": topic(.bridgeAvailability),
                    "payload_on": "online", "payload_off": "offline",
                ]),
                "version": Self.component(of: bridgeID, "version", "sensor", [
                    "name": "Version", "state_topic": view, "entity_category": "diagnostic",
                    "value_template": "{{ value_json.version }}", "availability_topic": topic(.bridgeAvailability),
                ]),
                "accessories": count("accessories", "Accessories"),
                "worn": count("worn", "Worn accessories"),
                "routed": count("routed", "Routed accessories"),
                "hubs_online": count("hubs_online", "Hubs online"),
            ],
        ]
    }
}
