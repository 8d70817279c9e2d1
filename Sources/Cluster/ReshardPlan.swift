import AccessoryModel

/// Moving a cluster to another slot count (`accessory-bridge reshard`, docs/scale-out.md "Changing the slot count"):
/// whether it may go ahead, where each accessory's retained state goes, and the device listings anew. Pure: the shell
/// reads etcd and the retained states, and does what this says.
public enum ReshardPlan {
    /// What etcd says of the cluster, and what to do about it.
    public enum Decision: Hashable, Sendable {
        /// Record `to` as the cluster's count (it was `from`), then, every member gone, move the states.
        case record(from: ClusterSlots, to: ClusterSlots)
        /// A reshard to this count ended before it was done: do what is left.
        case resume(ClusterSlots)
        /// The cluster has this count already, and no reshard is under way: nothing to do.
        case nothing(ClusterSlots)
        /// Not now, and why.
        case refuse(String)
    }

    /// The decision, from the cluster's recorded count (`nil`: no member ever started). Running members are no
    /// reason to wait: they leave when they see `N resharding`, and join again once it is `N`.
    public static func decide(cluster: String, recorded: String?, to target: ClusterSlots) -> Decision {
        guard let recorded else {
            return .refuse("cluster \(cluster) has no slot count recorded in etcd: no member of it ever started")
        }
        guard let (from, unfinished) = Recorded.parse(recorded) else {
            return .refuse("cluster \(cluster) records '\(recorded)' as its slot count, which is not one")
        }
        if unfinished {
            return from == target
                ? .resume(target)
                : .refuse(
                    "cluster \(cluster) has a reshard to \(from.count) slots unfinished: run it again with --slots "
                        + "\(from.count) first")
        }
        return from == target ? .nothing(target) : .record(from: from, to: target)
    }

    /// The slot count as etcd's `layout` key holds it: `64`, or `64 resharding` while a reshard to 64 moves the
    /// states (a member then refuses to join: it would rebuild before its states are there).
    public enum Recorded {
        static let suffix = " resharding"

        /// The value of a reshard to `slots` under way.
        public static func resharding(to slots: ClusterSlots) -> String { "\(slots.count)\(suffix)" }

        /// The count, and whether a reshard to it is under way; `nil` for a value that is neither form.
        public static func parse(_ value: String) -> (ClusterSlots, resharding: Bool)? {
            let resharding = value.hasSuffix(suffix)
            let number = resharding ? value.dropLast(suffix.count) : Substring(value)
            guard let count = Int(number), let slots = ClusterSlots(count) else { return nil }
            return (slots, resharding)
        }
    }

    /// The device listings under the new count (etcd's lister keys, and the shared keys of devices listed by two
    /// slots or more): every device an accessory lists, listed by its hub's slot. Accessories are what their newest
    /// states say (``steps(for:to:)`` keeps those): a slot does not list its devices again when it starts, it finds
    /// them listed.
    public static func listings(
        of accessories: [(hub: HubID, devices: [BluetoothAddress])], to slots: ClusterSlots
    ) -> [BluetoothAddress: ListerSlots] {
        var listings: [BluetoothAddress: ListerSlots] = [:]
        for (hub, devices) in accessories {
            for device in devices {
                listings[device, default: ListerSlots([])].slots.insert(slots.slot(of: hub))
            }
        }
        return listings
    }

    /// One accessory's retained state as found under a slot's root.
    public struct Retained: Hashable, Sendable {
        public var slot: Int
        public var accessory: AccessoryID
        public var hub: HubID
        /// Which copy is newest when an accessory is found under two slots (a reshard that ended halfway): its
        /// sequence, then its owner's epoch.
        public var lastSequence: UInt64
        public var epoch: UInt64

        public init(slot: Int, accessory: AccessoryID, hub: HubID, lastSequence: UInt64, epoch: UInt64) {
            self.slot = slot
            self.accessory = accessory
            self.hub = hub
            self.lastSequence = lastSequence
            self.epoch = epoch
        }
    }

    /// What to do with one retained state.
    public enum Step: Hashable, Sendable {
        /// Publish it under slot `to` (retained), then remove it (and its view) under slot `from`.
        case move(Retained, to: Int)
        /// Remove it (and its view): an older copy of an accessory whose newest copy is kept or moved.
        case remove(Retained)
    }

    /// The steps that put every accessory's newest state under the slot its hub belongs to in `slots`, and nothing
    /// anywhere else; a state already where it belongs and alone needs none. Running it again after all its steps
    /// were done gives none.
    public static func steps(for states: [Retained], to slots: ClusterSlots) -> [Step] {
        func inPlace(_ state: Retained) -> Bool { state.slot == slots.slot(of: state.hub) }
        // The newer copy wins; between equals, the one in place, else the lower slot (one answer whatever the order).
        func better(_ a: Retained, than b: Retained) -> Bool {
            if (a.lastSequence, a.epoch) != (b.lastSequence, b.epoch) {
                return (a.lastSequence, a.epoch) > (b.lastSequence, b.epoch)
            }
            if inPlace(a) != inPlace(b) { return inPlace(a) }
            return a.slot < b.slot
        }
        var newest: [AccessoryID: Retained] = [:]
        for state in states where newest[state.accessory].map({ better(state, than: $0) }) ?? true {
            newest[state.accessory] = state
        }
        var steps: [Step] = []
        for state in states.sorted(by: { ($0.slot, $0.accessory.rawValue) < ($1.slot, $1.accessory.rawValue) }) {
            guard let kept = newest[state.accessory] else { continue }
            let target = slots.slot(of: kept.hub)
            if kept == state {
                if !inPlace(state) { steps.append(.move(state, to: target)) }
            } else if state.slot != target {
                // An older copy; one under the target's root is overwritten by the move (removing it after would
                // remove what moved there).
                steps.append(.remove(state))
            }
        }
        return steps
    }
}
