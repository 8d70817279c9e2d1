/// In a cluster, a playing device that accessories of two slots or more list is **shared**: each slot's engine keeps
/// rules 3 and 6 only among its own accessories, so a slot routes a shared device only while it holds it, and etcd
/// decides who does (a compare-and-swap per shared device: docs/scale-out.md, "Shared devices").
///
/// This is a slot's part of it, as a sub-machine of its ``RoutingEngine`` (as postgres-nio's
/// `ExtendedQueryStateMachine` sits under `ConnectionStateMachine`): which devices are shared, which this slot holds
/// or waits for, and the decisions that wait for etcd. It decides when the slot claims a device, when a decision
/// runs again, when a route ends without a command and when a device is let go; the engine runs the rules it hands
/// back (``Action``), and passes its claims, worn listings and releases on in its ``RoutingOutput``. It is empty for
/// a single bridge and for every device that only one slot lists, which costs nothing on the message path.
struct SharedDeviceStateMachine: Sendable {
    /// Why a routing decision waits for a device: the rule that would route it, run again when the answer comes.
    enum Rule: Hashable, Sendable {
        /// Rule 4: the accessory was put on.
        case putOn
        /// Rule 6: the device became active while unrouted.
        case activated
        /// Rules 6, 7 and 12 for a worn, free accessory: the device is its best candidate, routed for this reason.
        case candidate(SwitchCommand.Reason)
        /// Rule 11: the call by `by` ended, and the device it displaced comes back to the accessory.
        case interruption(by: BluetoothAddress)
        /// The slot routes the device already (it did before the device was shared, or restored that route).
        case keep

        var isCandidate: Bool {
            if case .candidate = self { true } else { false }
        }

        /// What its claim may take.
        var claim: DeviceClaim.Kind {
            switch self {
            case .putOn: .takeOver
            case .activated: .mostRecentlyWorn
            case .candidate, .interruption, .keep: .ifFree
            }
        }
    }

    /// A decision that waits for a device.
    struct Pending: Hashable, Sendable {
        var accessory: AccessoryID
        var rule: Rule
        /// Whether its ``DeviceClaim`` went out (not yet while the device is unconfirmed).
        var claimed: Bool
    }

    /// What the engine is to do for a device after etcd's news.
    enum Action: Hashable, Sendable {
        case none
        /// Run again the decision that waited: the slot holds the device now, or it is no longer shared.
        case decideAgain(Pending)
        /// Ask etcd for the device.
        case claim(DeviceClaim)
        /// Another slot holds the device: this slot's route of it ends without a command (the holder's commands move
        /// the device), as when another accessory's put-on takes a device in one bridge.
        case dropRoute
        /// This slot's claim lost: its route of the device ends without a command, and the decision that waited, if
        /// any, looks elsewhere (what else a call displaced; the accessory's best other free candidate).
        case lost(Pending?)
        /// The slot that took the device let it go without a command the device applied: it still plays where this
        /// slot's route had it, on that accessory; claim it back for it.
        case reclaim(AccessoryID)
    }

    /// A route this slot dropped when another slot took its device (``heldElsewhere(_:epoch:routedTo:)``).
    struct DroppedRoute: Hashable, Sendable {
        var accessory: AccessoryID
        /// The newest holder's epoch since: a command of it, or of a newer one, moved the device.
        var holderEpoch: UInt64
    }

    /// Listed here and by another slot too.
    private(set) var shared: Set<BluetoothAddress> = []
    /// Newly listed here: whether another slot lists them too is not known yet. They wait like shared ones.
    private(set) var unconfirmed: Set<BluetoothAddress> = []
    /// Held by this slot, with the holder key's revision: the epoch of their commands.
    private(set) var held: [BluetoothAddress: UInt64] = [:]
    /// Held by another slot, with its revision: to this slot's rules they are routed elsewhere.
    private(set) var heldElsewhere: [BluetoothAddress: UInt64] = [:]
    /// Decisions that wait for a claim's answer or for the device's confirmation.
    private(set) var pending: [BluetoothAddress: Pending] = [:]
    /// The worn accessories' shared devices, as told to the shell (``WornListing``).
    private(set) var worn: [AccessoryID: Set<BluetoothAddress>] = [:]
    /// The newest holder revision seen for each device that was shared: its commands never carry an older epoch,
    /// which the device would drop (it compares the epoch first: ``CommandOrder``).
    private(set) var floors: [BluetoothAddress: UInt64] = [:]
    /// Devices whose rule 6 claim stood back for another slot's newer worn listing, with when rule 6 looks again.
    /// That slot claims the device within milliseconds, and etcd's watch says so; but its listing may be out of date
    /// (its accessory taken off and the deletion not yet written, or its member paused or cut off from etcd, the
    /// listing there until its lease ends), and then no slot claims, and nothing else runs rule 6 again.
    private(set) var standingBack: [BluetoothAddress: Timestamp] = [:]
    /// How long a stand-back waits before rule 6 looks again: past a claim's few milliseconds, within a lease.
    static let lookAgainAfter: Int64 = 1_000
    /// Routes this slot dropped when another slot took their device, while the device has applied no command of a
    /// holder since and still reports them. A put-on's claim takes a device from anyone; when its accessory came off
    /// before the answer, its slot lets the device go at once, without a command (it routes nothing), and the device
    /// plays on where this slot's route had it, which no rule of this slot's would see again: the device's reports
    /// are older than the taker's epoch.
    private(set) var dropped: [BluetoothAddress: DroppedRoute] = [:]

    // MARK: - Queries

    /// Whether the slot must hold `source` before it routes it: it is shared, or may be (not confirmed yet).
    func needsClaim(_ source: BluetoothAddress) -> Bool {
        (shared.contains(source) || unconfirmed.contains(source)) && held[source] == nil
    }

    func isHeldElsewhere(_ source: BluetoothAddress) -> Bool {
        heldElsewhere[source] != nil
    }

    /// Whether worn listings can change at all: a single bridge, and a slot sharing nothing, skip the look-up.
    var tracksWorn: Bool { !shared.isEmpty || !worn.isEmpty }

    /// Whether the slot holds any device (a single bridge never does: no walk after each change).
    var holdsAny: Bool { !held.isEmpty }

    /// When rule 6 next looks again at a device it stood back for, if ever (a single bridge: never, at no cost).
    var nextLookAgain: Timestamp? {
        standingBack.isEmpty ? nil : standingBack.values.min()
    }

    /// The epoch of a command to `source`: the holder's revision while held here; else the slot's own, never below
    /// what a holder's commands carried.
    func epoch(of source: BluetoothAddress, slotEpoch: UInt64) -> UInt64 {
        // A single bridge, and a slot that never shared a device: no look-up per command.
        if floors.isEmpty { return slotEpoch }
        if let revision = held[source] { return revision }
        guard let floor = floors[source] else { return slotEpoch }
        return max(slotEpoch, floor)
    }

    // MARK: - The engine's decisions

    /// Whether a rule may route `source` to `accessory` now. A shared device this slot does not hold may not: the
    /// decision waits (the latest one per device), and the device is claimed for it unless a claim is on its way that
    /// asks as much (a put-on's takes over, and so covers any other) or the device is not confirmed yet.
    mutating func mayRoute(_ source: BluetoothAddress, to accessory: AccessoryID, for rule: Rule)
        -> (allowed: Bool, claim: DeviceClaim?)
    {
        guard needsClaim(source) else { return (true, nil) }
        let waiting = pending[source]
        standingBack[source] = nil
        var decision = Pending(accessory: accessory, rule: rule, claimed: waiting?.claimed ?? false)
        let asksMore = rule == .putOn && waiting?.rule != .putOn
        var claim: DeviceClaim?
        if !unconfirmed.contains(source), !decision.claimed || asksMore {
            decision.claimed = true
            claim = DeviceClaim(source: source, accessory: accessory, kind: rule.claim)
        }
        pending[source] = decision
        return (false, claim)
    }

    /// Accessory `accessory` now lists `sources` while worn (empty: it is not worn, or lists no shared device): the
    /// listings to write or delete, as they changed, removals first.
    mutating func wornChanged(_ accessory: AccessoryID, listing sources: SourcePair) -> [WornListing] {
        let now = Set(sources.filter(shared.contains))
        let before = worn[accessory] ?? []
        guard now != before else { return [] }
        worn[accessory] = now.isEmpty ? nil : now
        return before.subtracting(now).sorted().map { WornListing(accessory: accessory, source: $0, isWorn: false) }
            + now.subtracting(before).sorted().map { WornListing(accessory: accessory, source: $0, isWorn: true) }
    }

    /// After a change: lets go of the devices this slot holds but no longer routes (`routedHere` says), or that are no
    /// longer shared, unless a decision waits for them. The output's commands, which come before, carry their epochs.
    mutating func releases(routedHere: (BluetoothAddress) -> Bool) -> [DeviceRelease] {
        var releases: [DeviceRelease] = []
        for (source, revision) in held.sorted(by: { $0.key < $1.key }) where pending[source] == nil {
            guard !routedHere(source) || !shared.contains(source) else { continue }
            held[source] = nil
            raiseFloor(of: source, to: revision)
            releases.append(DeviceRelease(source: source, epoch: revision))
        }
        return releases
    }

    // MARK: - The slot's listings

    /// An accessory of this slot lists `source` now, and none did: until the shell confirms whether another slot lists
    /// it too (``shared(_:_:routedTo:kept:)``), it waits like a shared device.
    mutating func listed(_ source: BluetoothAddress) {
        unconfirmed.insert(source)
    }

    /// No accessory of this slot lists `source` any more: what waited for it is dropped (a device held is let go by
    /// the next ``releases(routedHere:)``).
    mutating func unlisted(_ source: BluetoothAddress) {
        unconfirmed.remove(source)
        shared.remove(source)
        pending[source] = nil
        standingBack[source] = nil
        dropped[source] = nil
        forgetHolderElsewhere(source)
    }

    // MARK: - etcd's news

    /// Whether accessories of another slot list `source` too (etcd's lister keys). Returns whether that changed (the
    /// worn listings of the accessories listing it change with it), and, for a device the engine keeps, what to do:
    /// no longer shared, what waited runs; shared, what waited is claimed now that the device is confirmed, and a
    /// route the slot has (`routedTo`) is claimed for the route it has.
    mutating func shared(_ source: BluetoothAddress, _ isShared: Bool, routedTo: AccessoryID?, kept: Bool)
        -> (changed: Bool, action: Action)
    {
        let wasShared = shared.contains(source)
        unconfirmed.remove(source)
        if isShared {
            shared.insert(source)
        } else {
            shared.remove(source)
            standingBack[source] = nil
            dropped[source] = nil
            forgetHolderElsewhere(source)
        }
        let changed = wasShared != isShared
        // Kept or not (an accessory that does not take part may list it), the device's sharing is known from here.
        guard kept else { return (changed, .none) }
        if !isShared {
            return (changed, pending.removeValue(forKey: source).map(Action.decideAgain) ?? .none)
        }
        if var waiting = pending[source] {
            guard !waiting.claimed else { return (changed, .none) }
            waiting.claimed = true
            pending[source] = waiting
            return (changed, .claim(DeviceClaim(source: source, accessory: waiting.accessory, kind: waiting.rule.claim)))
        }
        guard held[source] == nil, let routedTo else { return (changed, .none) }
        pending[source] = Pending(accessory: routedTo, rule: .keep, claimed: true)
        return (changed, .claim(DeviceClaim(source: source, accessory: routedTo, kind: .ifFree)))
    }

    /// This slot holds `source` now, at `epoch` (the holder key's revision): the decision that waited for it runs
    /// again, and its commands carry that epoch.
    mutating func claimed(_ source: BluetoothAddress, epoch: UInt64) -> Action {
        holdHere(source, at: epoch)
        return pending.removeValue(forKey: source).map(Action.decideAgain) ?? .none
    }

    /// Another slot holds `source` (at `holderEpoch`), and this slot may not take it.
    mutating func claimRefused(_ source: BluetoothAddress, holderEpoch: UInt64) -> Action {
        holdElsewhere(source, at: holderEpoch)
        return .lost(pending.removeValue(forKey: source))
    }

    /// This slot's rule 6 claim stood back for another slot's later put-on: the decision is dropped, and rule 6
    /// looks again after ``lookAgainAfter`` unless etcd says meanwhile that a slot holds the device.
    mutating func claimWithdrawn(_ source: BluetoothAddress, at now: Timestamp) {
        pending[source] = nil
        standingBack[source] = now.advanced(byMilliseconds: Self.lookAgainAfter)
    }

    /// The devices rule 6 looks at again now, in order; each is taken off the list (a stand-back again puts it back).
    mutating func dueToLookAgain(at now: Timestamp) -> [BluetoothAddress] {
        guard !standingBack.isEmpty else { return [] }
        let due = standingBack.filter { $0.value <= now }.keys.sorted()
        for source in due { standingBack[source] = nil }
        return due
    }

    /// Another slot took `source` (etcd's watch: its holder key names another slot now, at `epoch`); this slot's route
    /// of it, if any, was to `routedTo`, and is remembered until the device applies a command of a holder's.
    mutating func heldElsewhere(_ source: BluetoothAddress, epoch: UInt64, routedTo: AccessoryID?) -> Action {
        holdElsewhere(source, at: epoch)
        if let routedTo { dropped[source] = DroppedRoute(accessory: routedTo, holderEpoch: epoch) }
        return .dropRoute
    }

    /// The slot that held `source` let it go: a route this slot dropped for it, which no command of a holder's moved
    /// since, is claimed back.
    mutating func releasedElsewhere(_ source: BluetoothAddress) -> Action {
        forgetHolderElsewhere(source)
        return dropped.removeValue(forKey: source).map { .reclaim($0.accessory) } ?? .none
    }

    // MARK: - The device's own reports

    /// The device reported where it is routed (`routedTo`; `nil`: nobody), after applying a command of epoch
    /// `applied`.
    ///
    /// Routed to nobody at its holder's epoch or a newer one, the holder's route ended (its PAUSE or RELEASE), and that
    /// slot lets go of the device right after the command: to this slot's rules the device is free from this report
    /// on, as it is to one bridge's (rule 6 when it plays again). etcd's news of the release may come after the
    /// device's next report, and nothing runs rule 6 again then. What the slot claims for it, etcd still decides
    /// (Cluster's `DeviceHolder.wornAsOf`).
    ///
    /// A route this slot dropped for the device is forgotten once a holder's command moved it, or it is elsewhere.
    mutating func reported(_ source: BluetoothAddress, routedTo: AccessoryID?, applied epoch: UInt64) {
        // A single bridge, and a slot whose devices no other slot holds and that dropped no route: no look-up.
        if routedTo == nil, !heldElsewhere.isEmpty, let holder = heldElsewhere[source], epoch >= holder {
            forgetHolderElsewhere(source)
        }
        if !dropped.isEmpty, let route = dropped[source], epoch >= route.holderEpoch || routedTo != route.accessory {
            dropped[source] = nil
        }
    }

    // MARK: - Holders, each raising the device's epoch floor once

    private mutating func holdHere(_ source: BluetoothAddress, at revision: UInt64) {
        held[source] = revision
        heldElsewhere[source] = nil
        standingBack[source] = nil
        dropped[source] = nil
        raiseFloor(of: source, to: revision)
    }

    private mutating func holdElsewhere(_ source: BluetoothAddress, at revision: UInt64) {
        held[source] = nil
        heldElsewhere[source] = revision
        standingBack[source] = nil
        dropped[source]?.holderEpoch = revision
        raiseFloor(of: source, to: revision)
    }

    /// No other slot holds `source` any more, as far as this slot knows.
    private mutating func forgetHolderElsewhere(_ source: BluetoothAddress) {
        if let revision = heldElsewhere.removeValue(forKey: source) { raiseFloor(of: source, to: revision) }
    }

    private mutating func raiseFloor(of source: BluetoothAddress, to revision: UInt64) {
        floors[source] = max(floors[source] ?? 0, revision)
    }
}
