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
