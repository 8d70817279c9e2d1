import AccessoryModel

/// A hub's retained birth and death certificate (`HubStatus`): online when it connects, offline by its will.
public struct HubStatus: Hashable, Sendable {
    public var online: Bool
    public var since: Timestamp

    public init(online: Bool, since: Timestamp) {
        self.online = online
        self.since = since
    }
}

/// The bridge's retained status (`BridgeStatus`): online on every connection, offline by its will and on shutdown.
public struct BridgeStatus: Hashable, Sendable {
    public var online: Bool
    public var version: String
    public var since: Timestamp

    public init(online: Bool, version: String = Release.version, since: Timestamp) {
        self.online = online
        self.version = version
        self.since = since
    }
}

/// How the bridge lays out its hubs' topics (`BridgeLayout`, retained at `R/bridge/layout`): ``slots`` is `nil` for
/// a single bridge (a hub's topics under `R`), or a cluster's slot count (under `R/slots/{slot}`). A hub that is not
/// told the count reads it here, and follows it when it changes (docs/scale-out.md, "The layout hubs read").
public struct BridgeLayout: Hashable, Sendable {
    public var slots: ClusterSlots?
    /// The release of the bridge that published it.
    public var version: String

    public init(slots: ClusterSlots?, version: String = Release.version) {
        self.slots = slots
        self.version = version
    }

    /// The root of `hub`'s topics under this layout.
    public func root(of hub: HubID, under root: TopicRoot) -> TopicRoot {
        slots.map { $0.root(of: hub, under: root) } ?? root
    }
}

/// The bridge asks a hub to send everything about an accessory again (`RebirthRequest`): its telemetry jumped from
/// ``lastSequence`` to ``receivedSequence``.
public struct RebirthRequest: Hashable, Sendable {
    public var accessory: AccessoryID
    public var lastSequence: UInt64
    public var receivedSequence: UInt64
    /// Why, for people.
    public var reason: String

    public init(accessory: AccessoryID, lastSequence: UInt64, receivedSequence: UInt64) {
        let count = receivedSequence &- lastSequence &- 1
        self.init(
            accessory: accessory, lastSequence: lastSequence, receivedSequence: receivedSequence,
            reason: "sequence \(receivedSequence) follows \(lastSequence): \(count) message\(count == 1 ? "" : "s") "
                + "missing; send Paired, Register and a full update again")
    }

    public init(accessory: AccessoryID, lastSequence: UInt64, receivedSequence: UInt64, reason: String) {
        self.accessory = accessory
        self.lastSequence = lastSequence
        self.receivedSequence = receivedSequence
        self.reason = reason
    }
}
