import AccessoryModel

/// What each kind of client may do on the broker: the one table the broker's roles are made from (mosquitto's dynamic
/// security plugin, set up by `accessoryctl roles`), and which docs/security.md shows.
/// deploy/mosquitto/acl writes the same rules with `pattern` lines, with the limit that patterns have (a device's user
/// name is also a valid hub id).
///
/// A client may subscribe to any filter; only what its role reads is delivered to it, retained messages included, and
/// only what its role writes is accepted from it (its will included).
///
/// Each role covers one bridge's topics and a cluster's (docs/scale-out.md), where the hubs' and accessories' topics
/// are under a slot's root, `R/slots/{slot}`: a hub's role still names only its own hub id, in every slot (its own
/// slot's owner refuses it elsewhere).
public struct BrokerRole: Hashable, Sendable {
    /// The role's name on the broker: `bridge`, `home-automation`, `hub:hub-1`, `device:123456789abc`.
    public var name: String
    /// Topic filters its clients may publish to.
    public var writes: [String]
    /// Topic filters whose messages its clients receive.
    public var reads: [String]

    public init(name: String, writes: [String], reads: [String]) {
        self.name = name
        self.writes = writes
        self.reads = reads
    }

    /// A hub: the telemetry of its own accessories, its status, and head-tracking frames as itself only
    /// (`R/sources/+/frames/{hub}/+`, to any host); it reads the bridge's answers to it, the head-tracking news of its
    /// own accessories, and the bridge's layout (to find its slot).
    public static func hub(_ hub: HubID, root: TopicRoot) -> BrokerRole {
        BrokerRole(
            name: "hub:\(hub)",
            writes: filters(of: [.telemetry, .hubStatus, .frames], root, hub: hub),
            reads: filters(of: [.result, .rebirth, .responses, .headTracking, .bridgeLayout], root, hub: hub))
    }

    /// A playing device, named by its Bluetooth address: its own state; it reads its own commands, and its own
    /// head-tracking news and frames (head motion is personal: no other device reads them).
    public static func device(_ source: BluetoothAddress, root: TopicRoot) -> BrokerRole {
        BrokerRole(
            name: "device:\(source.topicID)",
            writes: [Topic.sourceState(source: source).name(under: root)],
            reads: [Topic.Kind.sourceCommands, .hostHeadTracking, .frames].map { $0.filter(under: root, source: source) })
    }

    /// The bridge: everything it answers and announces (head-tracking news to hubs and hosts among it; it neither
    /// writes nor reads a frame), and, for home automation, the views, events, availability and Home Assistant's
    /// discovery under `homeAssistantPrefix`; it reads every hub's telemetry and status, every device's and
    /// accessory's state, the controls, and its own discovery configs and start-up marker.
    public static func bridge(root: TopicRoot, homeAssistantPrefix: String) -> BrokerRole {
        // One bridge's configs, and a cluster's, a node level per slot.
        let discovery = ["\(homeAssistantPrefix)/device/+/config", "\(homeAssistantPrefix)/device/+/+/config"]
        return BrokerRole(
            name: "bridge",
            writes: everywhere([
                Topic.Kind.result, .rebirth, .responses, .accessoryState, .sourceCommands, .bridgeStatus, .accessoryView,
                .accessoryEvents, .controlsResult, .bridgeAvailability, .hubAvailability, .bridgeView, .headTracking,
                .hostHeadTracking, .bridgeLayout,
            ], root) + markers(root) + discovery,
            reads: everywhere([.telemetry, .hubStatus, .sourceState, .accessoryState, .controls], root) + markers(root)
                + ["\(homeAssistantPrefix)/status"] + discovery)
    }

    /// Home automation, Home Assistant among it: the controls of accessories and Home Assistant's birth message; it
    /// reads states, statuses, what the bridge writes for it, and all of Home Assistant's prefix.
    public static func homeAutomation(root: TopicRoot, homeAssistantPrefix: String) -> BrokerRole {
        BrokerRole(
            name: "home-automation",
            writes: everywhere([.controls], root) + ["\(homeAssistantPrefix)/status"],
            reads: everywhere([
                Topic.Kind.accessoryState, .sourceState, .hubStatus, .bridgeStatus, .controlsResult, .accessoryView,
                .accessoryEvents, .bridgeView, .bridgeAvailability, .hubAvailability, .bridgeLayout,
            ], root) + ["\(homeAssistantPrefix)/#"])
    }

    /// The filters of `kinds` of one hub, for one bridge and in every slot of a cluster (each once).
    private static func filters(of kinds: [Topic.Kind], _ root: TopicRoot, hub: HubID) -> [String] {
        kinds.flatMap { kind in
            kind.isSlotted
                ? [kind.filter(under: root, hub: hub), kind.filterInEverySlot(under: root, hub: hub)]
                : [kind.filter(under: root, hub: hub)]
        }
    }

    /// The filters of `kinds` for one bridge and in every slot of a cluster (each once).
    private static func everywhere(_ kinds: [Topic.Kind], _ root: TopicRoot) -> [String] {
        kinds.flatMap { kind in
            kind.isSlotted ? [kind.filter(under: root), kind.filterInEverySlot(under: root)] : [kind.filter(under: root)]
        }
    }

    /// A bridge's start-up markers, and each slot's.
    private static func markers(_ root: TopicRoot) -> [String] {
        [root.rebuildMarkers, "\(root.rawValue)/slots/+/bridge/rebuild/#"]
    }
}
