import AccessoryModel

/// A member's view of the shared devices (docs/scale-out.md, "Shared devices"), as a pure state machine: etcd's watch
/// (the `shared` and `holders` keys) and the answers to its slots' own requests go in, each with its etcd revision;
/// what each slot served here must hear comes out, as ``SharedDeviceEvent``s. Nothing here touches etcd.
///
/// Everything about a device is ordered by etcd's revisions, not by when it arrives: a slot's own answer and the
/// watch's news travel on different connections, and the older of the two must not undo the newer.
public struct SharedDeviceDirectory: Sendable {
    /// What one slot must hear.
    public struct Notice: Hashable, Sendable {
        public var slot: Int
        public var event: SharedDeviceEvent

        public init(slot: Int, _ event: SharedDeviceEvent) {
            self.slot = slot
            self.event = event
        }
    }

    struct Device: Hashable, Sendable {
        /// The slots listing it while it is shared (two or more), else empty.
        var listers: Set<Int> = []
        var listersRevision: UInt64 = 0
        var holder: DeviceHolder?
        /// The holder key's revision: its last put (the holder's epoch) or its delete.
        var holderRevision: UInt64 = 0
    }

    private(set) var devices: [BluetoothAddress: Device] = [:]
    /// The slots this member serves.
    public private(set) var served: Set<Int> = []

    public init() {}

    /// Who holds `device`, as far as this member knows, with the holder key's revision.
    public func holder(of device: BluetoothAddress) -> (holder: DeviceHolder, epoch: UInt64)? {
        guard let entry = devices[device], let holder = entry.holder else { return nil }
        return (holder, entry.holderRevision)
    }

    // MARK: - etcd's watch

    /// The `shared` key of `device` was written (`listers`: two slots or more) or deleted (`nil`) at `revision`.
    public mutating func listersChanged(_ device: BluetoothAddress, to listers: Set<Int>?, at revision: UInt64) -> [Notice] {
        var entry = devices[device] ?? Device()
        guard revision > entry.listersRevision else { return [] }
        let before = entry.listers
        entry.listers = (listers?.count ?? 0) >= 2 ? listers! : []
        entry.listersRevision = revision
        devices[device] = entry
        var notices: [Notice] = []
        for slot in served.sorted() {
            let was = before.contains(slot)
            let isNow = entry.listers.contains(slot)
            if isNow && !was {
                notices.append(Notice(slot: slot, .shared(device, true)))
                if let holder = entry.holder, holder.slot != slot {
                    notices.append(Notice(slot: slot, .heldElsewhere(device, epoch: entry.holderRevision)))
                }
            } else if was && !isNow {
                notices.append(Notice(slot: slot, .shared(device, false)))
            }
        }
        return notices
    }

    /// The `holders` key of `device` was written (`holder`) or deleted (`nil`) at `revision`.
    public mutating func holderChanged(_ device: BluetoothAddress, to holder: DeviceHolder?, at revision: UInt64) -> [Notice] {
        var entry = devices[device] ?? Device()
        guard revision > entry.holderRevision else { return [] }
        let before = entry.holder
        entry.holder = holder
        entry.holderRevision = revision
        devices[device] = entry
        var notices: [Notice] = []
        if let holder, served.contains(holder.slot) {
            notices.append(Notice(slot: holder.slot, .claimed(device, epoch: revision)))
        }
        for slot in served.sorted() where entry.listers.contains(slot) && slot != holder?.slot {
            if holder != nil {
                notices.append(Notice(slot: slot, .heldElsewhere(device, epoch: revision)))
            } else if let before, before.slot != slot {
                notices.append(Notice(slot: slot, .releasedElsewhere(device)))
            }
        }
        return notices
    }

    // MARK: - The slots' own requests

    /// Slot `slot` lists `device` now: its lister key holds `listers` as of `revision`. The slot hears that etcd has
    /// its listing, and whether the device is shared (as of that revision, or what the watch said since); other slots
    /// here, what changed.
    public mutating func listed(_ device: BluetoothAddress, by slot: Int, listers: Set<Int>, at revision: UInt64)
        -> [Notice]
    {
        let notices = listersChanged(device, to: listers, at: revision)
        let shared = devices[device]?.listers.contains(slot) ?? false
        return notices.filter { $0 != Notice(slot: slot, .shared(device, shared)) } + [Notice(slot: slot, .listed(device, shared: shared))]
    }

    /// Slot `slot` holds `device` now: `holder` at `revision`. When the watch saw a newer holder first, the claim
    /// is as good as refused, and the slot hears so.
    public mutating func claimed(_ device: BluetoothAddress, by slot: Int, holder: DeviceHolder, at revision: UInt64)
        -> [Notice]
    {
        let known = devices[device]?.holderRevision ?? 0
        if revision > known { return holderChanged(device, to: holder, at: revision) }
        // The watch told the slot already.
        if known == revision { return [] }
        var notices = [Notice(slot: slot, .claimRefused(device, holderEpoch: known))]
        if devices[device]?.holder == nil { notices.append(Notice(slot: slot, .releasedElsewhere(device))) }
        return notices
    }

    /// Slot `slot`'s claim of `device` was refused: `holder` holds it at `revision`. The slot hears it, and then
    /// what the watch said since, when that is newer.
    public mutating func refused(_ device: BluetoothAddress, to slot: Int, holder: DeviceHolder, at revision: UInt64)
        -> [Notice]
    {
        var notices = holderChanged(device, to: holder, at: revision)
        let entry = devices[device]!
        notices.append(Notice(slot: slot, .claimRefused(device, holderEpoch: max(revision, entry.holderRevision))))
        if entry.holderRevision > revision {
            if let current = entry.holder {
                notices.append(
                    Notice(slot: slot, current.slot == slot ? .claimed(device, epoch: entry.holderRevision)
                        : .heldElsewhere(device, epoch: entry.holderRevision)))
            } else {
                notices.append(Notice(slot: slot, .releasedElsewhere(device)))
            }
        }
        return notices
    }

    // MARK: - The slots served here

    /// This member serves `slot` now: what it must know of its shared devices before it serves.
    public mutating func slotStarted(_ slot: Int) -> [Notice] {
        served.insert(slot)
        var notices: [Notice] = []
        for (device, entry) in devices.sorted(by: { $0.key < $1.key }) where entry.listers.contains(slot) {
            notices.append(Notice(slot: slot, .shared(device, true)))
            if let holder = entry.holder, holder.slot != slot {
                notices.append(Notice(slot: slot, .heldElsewhere(device, epoch: entry.holderRevision)))
            }
        }
        return notices
    }

    public mutating func slotStopped(_ slot: Int) {
        served.remove(slot)
    }

    /// The watch started over from a fresh read at `revision`: the `shared` and `holders` keys as they are now. What
    /// changed meanwhile is told as the watch would have; a key gone is taken as deleted at `revision`.
    public mutating func loaded(
        shared: [BluetoothAddress: (listers: Set<Int>, revision: UInt64)],
        holders: [BluetoothAddress: (holder: DeviceHolder, revision: UInt64)], at revision: UInt64
    ) -> [Notice] {
        var notices: [Notice] = []
        for device in Set(devices.keys).union(shared.keys).union(holders.keys).sorted() {
            if let (listers, at) = shared[device] {
                notices += listersChanged(device, to: listers, at: at)
            } else if !(devices[device]?.listers.isEmpty ?? true) {
                notices += listersChanged(device, to: nil, at: revision)
            }
            if let (holder, at) = holders[device] {
                notices += holderChanged(device, to: holder, at: at)
            } else if devices[device]?.holder != nil {
                notices += holderChanged(device, to: nil, at: revision)
            }
        }
        return notices
    }
}
