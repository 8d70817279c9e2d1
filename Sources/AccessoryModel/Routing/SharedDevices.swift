/// In a cluster, a playing device that accessories of two slots or more list is **shared**: each slot's engine keeps
/// rules 3 and 6 only among its own accessories, so a slot routes a shared device only while it holds it, and etcd
/// decides who does (a compare-and-swap per shared device: docs/scale-out.md, "Shared devices").
///
/// The engine asks for a device with a ``DeviceClaim`` and keeps the decision pending; the answer
/// (``SharedDeviceEvent``) runs it again. A device the slot stops routing is let go with a ``DeviceRelease``, and
/// which worn accessories list shared devices is told with ``WornListing``s (rule 6 compares put-ons across slots).
public struct DeviceClaim: Hashable, Sendable, CustomStringConvertible {
    /// What a claim may take, after the rule that makes it.
    public enum Kind: String, Hashable, Sendable {
        /// Rule 4 (put on): the device, from whoever holds it, as one bridge routes a put-on's best candidate
        /// wherever it plays.
        case takeOver
        /// Rule 6 (the device became active while unrouted): only for the most recently worn accessory listing it,
        /// in etcd's order of the worn listings, and only from nobody or from a holder whose accessory was put on
        /// earlier. When another slot's accessory was put on later, this slot stands back: that slot takes it.
        case mostRecentlyWorn
        /// The other rules (a free device for a worn, free accessory; a route the slot had): only from nobody.
        case ifFree
    }

    public var source: BluetoothAddress
    /// The accessory that is to have it.
    public var accessory: AccessoryID
    public var kind: Kind

    public init(source: BluetoothAddress, accessory: AccessoryID, kind: Kind) {
        self.source = source
        self.accessory = accessory
        self.kind = kind
    }

    public var description: String { "\(source) for \(accessory) (\(kind))" }
}

/// A worn accessory lists a shared device (`isWorn`), or no longer does (taken off, the device unlisted or no longer
/// shared): the shell writes or deletes the listing's key, whose revision orders the put-ons in etcd.
public struct WornListing: Hashable, Sendable {
    public var accessory: AccessoryID
    public var source: BluetoothAddress
    public var isWorn: Bool

    public init(accessory: AccessoryID, source: BluetoothAddress, isWorn: Bool) {
        self.accessory = accessory
        self.source = source
        self.isWorn = isWorn
    }
}

/// A shared device the slot held and no longer routes: the shell deletes its holder key if it still has this epoch.
public struct DeviceRelease: Hashable, Sendable {
    public var source: BluetoothAddress
    /// The holder key's revision when this slot claimed it.
    public var epoch: UInt64

    public init(source: BluetoothAddress, epoch: UInt64) {
        self.source = source
        self.epoch = epoch
    }
}

/// What a slot's ``RoutingEngine`` knows of its shared devices: storage, no decisions. Empty for a single bridge and
/// for every device that only one slot lists, which costs nothing on the message path.
struct SharedDevices: Sendable {
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

    struct Pending: Hashable, Sendable {
        var accessory: AccessoryID
        var rule: Rule
        /// Whether its ``DeviceClaim`` went out (not yet while the device is unconfirmed).
        var claimed: Bool
    }

    /// Listed here and by another slot too.
    var shared: Set<BluetoothAddress> = []
    /// Newly listed here: whether another slot lists them too is not known yet. They wait like shared ones.
    var unconfirmed: Set<BluetoothAddress> = []
    /// Held by this slot, with the holder key's revision: the epoch of their commands.
    var held: [BluetoothAddress: UInt64] = [:]
    /// Held by another slot, with its revision: to this slot's rules they are routed elsewhere.
    var heldElsewhere: [BluetoothAddress: UInt64] = [:]
    /// Decisions that wait for a claim's answer or for the device's confirmation.
    var pending: [BluetoothAddress: Pending] = [:]
    /// The worn accessories' shared devices, as told to the shell (``WornListing``).
    var worn: [AccessoryID: Set<BluetoothAddress>] = [:]
    /// The newest holder revision seen for each device that was shared: its commands never carry an older epoch,
    /// which the device would drop (it compares the epoch first: ``CommandOrder``).
    var floors: [BluetoothAddress: UInt64] = [:]

    /// Whether the slot must hold `source` before it routes it: it is shared, or may be (not confirmed yet).
    func needsClaim(_ source: BluetoothAddress) -> Bool {
        (shared.contains(source) || unconfirmed.contains(source)) && held[source] == nil
    }

    func isHeldElsewhere(_ source: BluetoothAddress) -> Bool {
        heldElsewhere[source] != nil
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

    /// This slot holds `source` now, at `revision`.
    mutating func holdHere(_ source: BluetoothAddress, at revision: UInt64) {
        held[source] = revision
        heldElsewhere[source] = nil
        raiseFloor(of: source, to: revision)
    }

    /// Another slot holds `source`, at `revision`.
    mutating func holdElsewhere(_ source: BluetoothAddress, at revision: UInt64) {
        held[source] = nil
        heldElsewhere[source] = revision
        raiseFloor(of: source, to: revision)
    }

    /// No other slot holds `source` any more, as far as this slot knows.
    mutating func forgetHolderElsewhere(_ source: BluetoothAddress) {
        if let revision = heldElsewhere.removeValue(forKey: source) { raiseFloor(of: source, to: revision) }
    }

    mutating func raiseFloor(of source: BluetoothAddress, to revision: UInt64) {
        floors[source] = max(floors[source] ?? 0, revision)
    }
}

/// What a slot's shell learns of its shared devices from etcd: its own requests' answers, and the watch of the other
/// slots' holders and listers (docs/scale-out.md, "Shared devices").
public enum SharedDeviceEvent: Hashable, Sendable {
    /// Whether accessories of another slot list the device too.
    case shared(BluetoothAddress, Bool)
    /// The answer to this slot's listing of the device: etcd has it now, and says whether another slot lists it too.
    case listed(BluetoothAddress, shared: Bool)
    /// This slot's claim won: it holds the device, at this epoch (the holder key's revision).
    case claimed(BluetoothAddress, epoch: UInt64)
    /// This slot's claim lost to the holder of this epoch.
    case claimRefused(BluetoothAddress, holderEpoch: UInt64)
    /// This slot's rule 6 claim stood back: another slot's accessory listing the device was put on later, and that
    /// slot takes it. The decision is dropped; the device stays free to this slot's rules.
    case claimWithdrawn(BluetoothAddress)
    /// Another slot took the device, at this epoch.
    case heldElsewhere(BluetoothAddress, epoch: UInt64)
    /// The slot that held the device let it go.
    case releasedElsewhere(BluetoothAddress)
}
