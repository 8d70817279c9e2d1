import AccessoryModel

/// A served slot's requests about its playing devices (docs/scale-out.md, "Shared devices"): its listings, its
/// put-ons, its claims and its releases, as a pure state machine. One request at a time, in the order the slot made
/// them: each reply of etcd goes in, and the next call to make — or what the request came to, for the member's
/// ``SharedDeviceDirectory`` — comes out. Who may take a shared device from whom is decided here
/// (``DeviceClaim/Kind/mayTake(from:by:wornRevision:)``), and tested without a store; the shell (`SlotDevices` in
/// BridgeCluster) only makes the calls it is told to, in the slot's ``LeaseSession``.
///
/// Each write is a compare-and-swap on the revision just read, made again from a fresh read when another writer came
/// first; a call etcd did not answer is made again after the ``RetryPolicy``'s pause, for as long as the slot is
/// served, but a release, which gives up after the policy's patience (the holder key goes with the lease anyway).
public struct SlotDeviceRequests: Sendable {
    /// A call to make to etcd.
    public enum Call: Hashable, Sendable {
        case get(String)
        case read(prefix: String)
        case commit(CoordinationTransaction)
    }

    /// What a call returned.
    public enum Reply: Hashable, Sendable {
        case entry(CoordinationEntry?)
        case snapshot(CoordinationSnapshot)
        /// The transaction's revision, or `nil` when one of its conditions failed.
        case committed(UInt64?)
    }

    /// What a request came to, for the directory.
    public enum Answer: Hashable, Sendable {
        case listed(BluetoothAddress, listers: Set<Int>, revision: UInt64)
        case claimed(BluetoothAddress, DeviceHolder, revision: UInt64)
        case refused(BluetoothAddress, DeviceHolder, revision: UInt64)
        /// A rule 6 claim stood back for a later put-on of another slot's accessory.
        case withdrawn(BluetoothAddress)
    }

    public enum Step: Hashable, Sendable {
        /// Make this call, and report its reply (``replied(_:)``) or its failure (``failed()``).
        case call(Call)
        /// etcd did not answer: pause this long, then make the call again.
        case retry(Call, after: Duration)
        /// The request is done, with what the directory must hear of it, if anything.
        case done(Answer?)
    }

    /// Where a request stands.
    private enum Stage: Sendable {
        case relist(BluetoothAddress, adding: Bool, reading: Bool, listers: Set<Int>)
        case worn(WornListing, key: String)
        case claim(DeviceClaim, Claiming)
        case release(BluetoothAddress)
    }

    private enum Claiming: Sendable {
        case readingWornListings
        /// With a rule 6 claim, the device's worn listings just read.
        case readingHolder(CoordinationSnapshot?)
        case taking(DeviceHolder)
    }

    public let slot: Int
    public let keys: ClusterKeys
    public let retry: RetryPolicy
    /// The revisions of the slot's worn listings, by key: the order of its put-ons, in etcd.
    private var worn: [String: UInt64] = [:]
    /// The devices the slot holds, with the holder key's revision (what it lets go of when it stops).
    public private(set) var held: [BluetoothAddress: UInt64] = [:]
    private var stage: Stage?
    private var lastCall: Call?
    private var failures = 0

    public init(slot: Int, keys: ClusterKeys, retry: RetryPolicy) {
        self.slot = slot
        self.keys = keys
        self.retry = retry
    }

    /// What the current request is, for the metrics and the logs: `lister`, `worn`, `device-claim`, `device-release`.
    public var callLabel: String {
        switch stage {
        case .relist?: "lister"
        case .worn?: "worn"
        case .claim?: "device-claim"
        case .release?, nil: "device-release"
        }
    }

    // MARK: - Events

    /// The next request: its first call.
    public mutating func start(_ request: SharedDeviceRequest) -> Step {
        precondition(stage == nil, "one request at a time")
        failures = 0
        switch request {
        case .listed(let device):
            stage = .relist(device, adding: true, reading: true, listers: [])
            return call(.get(keys.listers(device)))
        case .unlisted(let device):
            stage = .relist(device, adding: false, reading: true, listers: [])
            return call(.get(keys.listers(device)))
        case .worn(let listing):
            let key = keys.worn(listing.source, by: listing.accessory)
            stage = .worn(listing, key: key)
            let write =
                listing.isWorn
                ? CoordinationTransaction(puts: [.init(key: key, value: "\(slot)", lifetime: .session)])
                : CoordinationTransaction(deletes: [key])
            return call(.commit(write))
        case .claim(let claim):
            return startClaim(claim)
        case .release(let release):
            held[release.source] = nil
            stage = .release(release.source)
            let holder = keys.holder(release.source)
            return call(.commit(.init(conditions: [.init(key: holder, modRevision: release.epoch)], deletes: [holder])))
        }
    }

    /// The last call's reply.
    public mutating func replied(_ reply: Reply) -> Step {
        failures = 0
        switch (stage, reply) {
        case (.relist(let device, let adding, true, _)?, .entry(let current)):
            return relist(device, adding: adding, current: current)
        case (.relist(let device, let adding, false, let listers)?, .committed(let revision)):
            guard let revision else {
                // Another slot wrote the key meanwhile: read it again.
                stage = .relist(device, adding: adding, reading: true, listers: [])
                return call(.get(keys.listers(device)))
            }
            return done(adding ? .listed(device, listers: listers, revision: revision) : nil)
        case (.worn(let listing, let key)?, .committed(let revision)):
            worn[key] = listing.isWorn ? revision : nil
            return done(nil)
        case (.claim(let claim, .readingWornListings)?, .snapshot(let listings)):
            // Across slots, rule 6 is the slot's whose accessory was listed last; which of its own accessories gets
            // the device is that slot's rule (their put-on times). A listing of its own written again (the device
            // connected to it again) must not make it stand back for itself, nor the others for it.
            if let latest = listings.entries.max(by: { $0.modRevision < $1.modRevision }), Int(latest.value) != slot {
                return done(.withdrawn(claim.source))
            }
            stage = .claim(claim, .readingHolder(listings))
            return call(.get(keys.holder(claim.source)))
        case (.claim(let claim, .readingHolder(let listings))?, .entry(let current)):
            return take(claim, holder: current, listings: listings)
        case (.claim(let claim, .taking(let mine))?, .committed(let revision)):
            guard let revision else {
                // Another writer came first: start again from a fresh read.
                stage = nil
                return startClaim(claim)
            }
            held[claim.source] = revision
            return done(.claimed(claim.source, mine, revision: revision))
        case (.release?, .committed):
            return done(nil)
        default:
            preconditionFailure("a reply that is not the one to the last call")
        }
    }

    /// The last call failed (etcd did not answer, or its answer could not be read): made again after a pause, but
    /// a release gives up after the policy's patience.
    public mutating func failed() -> Step {
        failures += 1
        if case .release? = stage, failures >= retry.triesBeforeGivingUp { return done(nil) }
        return .retry(lastCall!, after: retry.delay(after: failures))
    }

    // MARK: - The decisions

    /// Adds this slot to the device's listers, or takes it out, keeping its `shared` key in step (one transaction on
    /// the lister key's revision).
    private mutating func relist(_ device: BluetoothAddress, adding: Bool, current: CoordinationEntry?) -> Step {
        var listers = current.map { ListerSlots(parsing: $0.value).slots } ?? []
        if listers.contains(slot) == adding {
            return done(adding ? .listed(device, listers: listers, revision: current?.modRevision ?? 0) : nil)
        }
        if adding { listers.insert(slot) } else { listers.remove(slot) }
        let value = ListerSlots(listers).description
        var transaction = CoordinationTransaction(
            conditions: [.init(key: keys.listers(device), modRevision: current?.modRevision ?? 0)])
        if listers.isEmpty {
            transaction.deletes.append(keys.listers(device))
        } else {
            transaction.puts.append(.init(key: keys.listers(device), value: value, lifetime: .untilDeleted))
        }
        if listers.count >= 2 {
            transaction.puts.append(.init(key: keys.shared(device), value: value, lifetime: .untilDeleted))
        } else {
            transaction.deletes.append(keys.shared(device))
        }
        stage = .relist(device, adding: adding, reading: false, listers: listers)
        return call(.commit(transaction))
    }

    private mutating func startClaim(_ claim: DeviceClaim) -> Step {
        if claim.kind == .mostRecentlyWorn {
            stage = .claim(claim, .readingWornListings)
            return call(.read(prefix: keys.wornListings(claim.source)))
        }
        stage = .claim(claim, .readingHolder(nil))
        return call(.get(keys.holder(claim.source)))
    }

    /// Takes the device's holder key when the claim may (a compare-and-swap on the revision read), or stands refused.
    /// A rule 6 claim (`listings`: the worn listings it read first) sees the holder's accessory as those listings
    /// have it (``DeviceHolder/wornAsOf(_:keys:device:)``), and counts as put on when its slot's newest listing was
    /// written, the revision that let it go on.
    private mutating func take(
        _ claim: DeviceClaim, holder current: CoordinationEntry?, listings: CoordinationSnapshot?
    ) -> Step {
        let slot = slot
        let own = listings?.entries.filter { Int($0.value) == slot }.map(\.modRevision).max()
        let wornRevision = own ?? worn[keys.worn(claim.source, by: claim.accessory)] ?? 0
        // A holder key of this slot's own is written again too: it is a key of the slot's last owner (a member that
        // stopped serving it, or this one before the slot restarted), on that owner's lease, which its release or
        // its lease's end deletes; and the member's directory, which saw it put, would not tell the slot of it.
        if let current, let holder = DeviceHolder(parsing: current.value) {
            let seen = listings.map { holder.wornAsOf($0, keys: keys, device: claim.source) } ?? holder
            guard claim.kind.mayTake(from: seen, by: slot, wornRevision: wornRevision) else {
                return done(.refused(claim.source, holder, revision: current.modRevision))
            }
        }
        let mine = DeviceHolder(slot: slot, wornRevision: wornRevision, accessory: claim.accessory.rawValue)
        stage = .claim(claim, .taking(mine))
        let key = keys.holder(claim.source)
        return call(
            .commit(
                .init(
                    conditions: [.init(key: key, modRevision: current?.modRevision ?? 0)],
                    puts: [.init(key: key, value: mine.description, lifetime: .session)])))
    }

    private mutating func call(_ call: Call) -> Step {
        lastCall = call
        return .call(call)
    }

    private mutating func done(_ answer: Answer?) -> Step {
        stage = nil
        lastCall = nil
        return .done(answer)
    }
}

extension DeviceHolder {
    /// The holder as a rule 6 claim sees it after reading the device's worn listings (`listings`): an accessory put on
    /// after that read keeps its put-on's revision; one whose listing the read no longer has was taken off since its
    /// slot claimed the device (that slot lets go of it once its pause is out, a few milliseconds later) and counts as
    /// put on never, as one bridge's rule 6 looks only at the accessories worn now.
    public func wornAsOf(_ listings: CoordinationSnapshot, keys: ClusterKeys, device: BluetoothAddress)
        -> DeviceHolder
    {
        guard wornRevision != 0, wornRevision <= UInt64(max(0, listings.revision)) else { return self }
        let key = AccessoryID(accessory).map { keys.worn(device, by: $0) }
        let listed = listings.entries.first { $0.key == key }
        var seen = self
        seen.wornRevision = listed?.modRevision ?? 0
        return seen
    }
}

extension DeviceClaim.Kind {
    /// Whether a claim of this kind by `slot` (for an accessory whose worn listing has `wornRevision`) may take the
    /// device from `holder`: a put-on's from anyone, as one bridge routes a put-on's best candidate wherever it plays;
    /// rule 6's only from a holder whose accessory was put on earlier in etcd's order; the others' from nobody. A
    /// slot may always take a device from itself (another of its accessories).
    public func mayTake(from holder: DeviceHolder, by slot: Int, wornRevision: UInt64) -> Bool {
        guard holder.slot != slot else { return true }
        switch self {
        case .takeOver: return true
        case .mostRecentlyWorn: return holder.wornRevision < wornRevision
        case .ifFree: return false
        }
    }
}
