import AccessoryModel

extension ClusterSlots {
    /// The topic root of everything of a slot's hubs (their telemetry, statuses, results, rebirth requests, response
    /// topics) and accessories (their retained states, controls, views): `R/slots/{slot}`, such as
    /// `R/slots/17/hubs/hub-1/accessories/headphones/telemetry`. The playing devices' topics stay under `R`.
    public func root(of slot: Int, under root: TopicRoot) -> TopicRoot {
        TopicRoot("\(root.rawValue)/slots/\(slot)")!
    }

    /// The topic root of a hub's topics in this cluster.
    public func root(of hub: HubID, under root: TopicRoot) -> TopicRoot {
        self.root(of: slot(of: hub), under: root)
    }
}

extension Topic.Kind {
    /// Whether, in a cluster, topics of this kind live under a slot's root (all but the playing devices', which stay
    /// under the cluster's root: their states, commands, head-tracking news and frames; and the bridge's layout, which
    /// a hub reads to find its slot).
    public var isSlotted: Bool {
        switch self {
        case .sourceState, .sourceCommands, .hostHeadTracking, .frames, .bridgeLayout: false
        default: true
        }
    }

    /// The filter of every topic of this kind in a cluster: under every slot's root (`R/slots/+/…`) for a slotted
    /// kind, under `root` for the playing devices'.
    public func filterInEverySlot(under root: TopicRoot) -> String {
        let filter = filter(under: root)
        guard isSlotted else { return filter }
        return "\(root.rawValue)/slots/+" + filter.dropFirst(root.rawValue.count)
    }

    /// ``filterInEverySlot(under:)`` for one hub's topics (for a kind under the cluster's root, such as the frames a
    /// hub sends, ``filter(under:hub:)``).
    public func filterInEverySlot(under root: TopicRoot, hub: HubID) -> String {
        guard isSlotted else { return filter(under: root, hub: hub) }
        return filterInEverySlot(under: root).replacingOccurrences(of: "/hubs/+/", with: "/hubs/\(hub)/")
    }
}

extension ClusterSlot {
    /// This slot's topic root under the cluster's.
    public func root(under root: TopicRoot) -> TopicRoot {
        slots.root(of: number, under: root)
    }
}
