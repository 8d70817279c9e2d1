/// The slots of a cluster of bridges (docs/scale-out.md): the work is split into `count` slots, and every hub, with
/// all of its accessories, belongs to one: `FNV-1a-64(hub id) mod count`. Each slot is owned by one bridge at a time.
public struct ClusterSlots: Hashable, Sendable, CustomStringConvertible {
    /// How many slots: 1 to 4,096.
    public let count: Int

    public static let range = 1...4096

    public init?(_ count: Int) {
        guard Self.range.contains(count) else { return nil }
        self.count = count
    }

    /// The slot of a hub.
    public func slot(of hub: HubID) -> Int {
        Int(FNV1a.hash(hub.rawValue) % UInt64(count))
    }

    public var description: String { "\(count) slots" }
}

/// One slot of a cluster: what a bridge serves while it owns it.
public struct ClusterSlot: Hashable, Sendable, CustomStringConvertible {
    public let slots: ClusterSlots
    public let number: Int

    public init?(_ number: Int, of slots: ClusterSlots) {
        guard (0..<slots.count).contains(number) else { return nil }
        self.slots = slots
        self.number = number
    }

    /// Whether `hub` belongs to this slot; if not, the error that answers its requests here.
    public func refusal(of hub: HubID) -> AccessoryControlError? {
        let slot = slots.slot(of: hub)
        guard slot != number else { return nil }
        return .invalidRequest(
            reason: "hub \(hub) belongs to slot \(slot) of \(slots.count), not to slot \(number): a hub's slot is "
                + "FNV-1a-64 of its id mod the number of slots (docs/scale-out.md)")
    }

    /// `slot 3 of 12`.
    public var description: String { "slot \(number) of \(slots.count)" }
}
