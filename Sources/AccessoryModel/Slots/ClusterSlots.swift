/// The slots of a cluster of bridges (docs/scale-out.md): the work is split into `count` slots, and every routing
/// domain belongs to one: `FNV-1a-64(domain) mod count`. Each slot is owned by one bridge at a time.
///
/// A hub's routing domain is its household: the part of its id before `--` (`home-17--kitchen` and
/// `home-17--bedroom` are both in `home-17`), or the whole id when it has no `--`. A domain's hubs, their
/// accessories and the playing devices they share live in one slot, so that one state machine routes them (rule 3
/// and rule 6 hold across the household's hubs as in one bridge).
public struct ClusterSlots: Hashable, Sendable, CustomStringConvertible {
    /// How many slots: 1 to 4,096.
    public let count: Int

    public static let range = 1...4096

    public init?(_ count: Int) {
        guard Self.range.contains(count) else { return nil }
        self.count = count
    }

    /// The routing domain of a hub: its id up to the first `--`, or the whole id. Found in its bytes (a hub id is
    /// ASCII), as the C SDK's `audiohub_slot()` finds it: a member computes it for every message, and breaking each
    /// hub id into Characters cost it 3% of its CPU (docs/performance-history.md, "Slots on a few network loops").
    public static func domain(of hub: HubID) -> Substring {
        let id = hub.rawValue
        let bytes = id.utf8
        var afterDash = false
        var index = bytes.startIndex
        while index < bytes.endIndex {
            let dash = bytes[index] == UInt8(ascii: "-")
            if dash, afterDash { return id[..<bytes.index(before: index)] }
            afterDash = dash
            bytes.formIndex(after: &index)
        }
        return id[...]
    }

    /// The slot of a hub: its routing domain's.
    public func slot(of hub: HubID) -> Int {
        Int(FNV1a.hash(Self.domain(of: hub).utf8) % UInt64(count))
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
                + "FNV-1a-64 of its routing domain (its id up to '--', or all of it) mod the number of slots "
                + "(docs/scale-out.md)")
    }

    /// `slot 3 of 12`.
    public var description: String { "slot \(number) of \(slots.count)" }
}
