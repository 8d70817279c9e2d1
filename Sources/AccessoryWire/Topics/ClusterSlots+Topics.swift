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

extension ClusterSlot {
    /// This slot's topic root under the cluster's.
    public func root(under root: TopicRoot) -> TopicRoot {
        slots.root(of: number, under: root)
    }
}
