import AccessoryBridge
import AccessoryModel
import Cluster
import Logging

/// A served slot's requests about its playing devices, run against etcd one at a time, in the order the slot made
/// them (docs/scale-out.md, "Shared devices"): its listings, its put-ons, its claims and releases. The answers go to
/// the member's ``SharedDeviceDirectory`` (through `report`), which tells the slot, in etcd's order.
///
/// Each write is a compare-and-swap on the revision just read, tried again when another writer came first; a call
/// etcd did not answer is tried again after a pause, for as long as the slot is served (a member whose lease could
/// have expired stops its slots first).
final class SlotDevices: Sendable {
    /// What a request came to, for the directory.
    enum Answer: Sendable {
        case listed(BluetoothAddress, listers: Set<Int>, revision: UInt64)
        case claimed(BluetoothAddress, DeviceHolder, revision: UInt64)
        case refused(BluetoothAddress, DeviceHolder, revision: UInt64)
        /// A rule 6 claim stood back for a later put-on of another slot's accessory.
        case withdrawn(BluetoothAddress)
    }

    let slot: Int
    private let store: any CoordinationStore
    private let keys: ClusterKeys
    private let lease: Int64
    private let logger: Logger
    private let requests: AsyncStream<SharedDeviceLink.Request>.Continuation
    /// Runs the requests; ends with the devices the slot still holds.
    private let worker: Task<[BluetoothAddress: UInt64], Never>

    init(
        slot: Int, store: any CoordinationStore, keys: ClusterKeys, lease: Int64, logger: Logger, metrics: ClusterMetrics,
        report: @escaping @Sendable (Int, Answer) -> Void
    ) {
        self.slot = slot
        self.store = store
        self.keys = keys
        self.lease = lease
        var logger = logger
        logger[metadataKey: "slot"] = "\(slot)"
        self.logger = logger
        let (stream, requests) = AsyncStream<SharedDeviceLink.Request>.makeStream()
        self.requests = requests
        var state = State(slot: slot, store: store, keys: keys, lease: lease, logger: logger, metrics: metrics,
            report: report)
        worker = Task {
            for await request in stream {
                await state.run(request)
            }
            return state.held
        }
    }

    /// Hands a request over (from the slot's thread: it does not wait).
    func send(_ request: SharedDeviceLink.Request) {
        requests.yield(request)
    }

    /// Ends the requests: those handed over run for up to a second more (etcd may be gone: the slot stops because
    /// its lease may expire), then every device the slot holds is let go, so that other slots need not wait for the
    /// member's lease to end. Returns once done.
    func finish() async {
        requests.finish()
        let worker = self.worker
        let deadline = Task {
            try? await Task.sleep(for: .seconds(1))
            worker.cancel()
        }
        let held = await worker.value
        deadline.cancel()
        for (device, epoch) in held.sorted(by: { $0.key < $1.key }) {
            let transaction = CoordinationTransaction(
                conditions: [.init(key: keys.holder(device), modRevision: epoch)], deletes: [keys.holder(device)])
            do {
                _ = try await store.commit(transaction)
            } catch {
                logger.warning(
                    "could not let go of a shared device: it goes with this member's lease",
                    metadata: ["source.id": "\(device)", "error": "\(error)"])
            }
        }
    }

    /// What the worker keeps: the revisions of the slot's worn listings and the devices it holds.
    private struct State {
        let slot: Int
        let store: any CoordinationStore
        let keys: ClusterKeys
        let lease: Int64
        let logger: Logger
        let metrics: ClusterMetrics
        let report: @Sendable (Int, Answer) -> Void
        var worn: [String: UInt64] = [:]
        var held: [BluetoothAddress: UInt64] = [:]

        mutating func run(_ request: SharedDeviceLink.Request) async {
            switch request {
            case .listed(let device): await relist(device, adding: true)
            case .unlisted(let device): await relist(device, adding: false)
            case .worn(let listing):
                let key = keys.worn(listing.source, by: listing.accessory)
                let write =
                    listing.isWorn
                    ? CoordinationTransaction(puts: [.init(key: key, value: "\(slot)", lease: lease)])
                    : CoordinationTransaction(deletes: [key])
                let revision = await attempt("worn", { [store] in try await store.commit(write) }) ?? nil
                worn[key] = listing.isWorn ? revision : nil
            case .claim(let claim): await self.claim(claim)
            case .release(let release): await self.release(release.source, epoch: release.epoch)
            }
        }

        /// Adds this slot to the device's listers, or takes it out, and keeps its `shared` key in step (one transaction
        /// on the lister key's revision).
        mutating func relist(_ device: BluetoothAddress, adding: Bool) async {
            while !Task.isCancelled {
                guard let current = await attempt("lister", { [store, keys] in try await store.get(keys.listers(device)) }) else { return }
                var listers = current.map { ListerSlots(parsing: $0.value).slots } ?? []
                if listers.contains(slot) == adding {
                    if adding { report(slot, .listed(device, listers: listers, revision: current?.modRevision ?? 0)) }
                    return
                }
                if adding { listers.insert(slot) } else { listers.remove(slot) }
                let value = ListerSlots(listers).description
                var transaction = CoordinationTransaction(
                    conditions: [.init(key: keys.listers(device), modRevision: current?.modRevision ?? 0)])
                if listers.isEmpty {
                    transaction.deletes.append(keys.listers(device))
                } else {
                    transaction.puts.append(.init(key: keys.listers(device), value: value))
                }
                if listers.count >= 2 {
                    transaction.puts.append(.init(key: keys.shared(device), value: value))
                } else {
                    transaction.deletes.append(keys.shared(device))
                }
                let relisting = transaction
                guard let committed = await attempt("lister", { [store] in try await store.commit(relisting) }) else { return }
                if let revision = committed {
                    if adding { report(slot, .listed(device, listers: listers, revision: revision)) }
                    return
                }
                // Another slot wrote the key meanwhile: read it again.
            }
        }

        /// Takes the device's holder key when the claim may (``DeviceClaim/Kind``): a put-on's from anyone; rule 6's
        /// only for the most recently worn accessory listing it, from nobody or from a holder whose accessory was put
        /// on earlier; the others' from nobody. A compare-and-swap on the revision read.
        mutating func claim(_ claim: DeviceClaim) async {
            let key = keys.holder(claim.source)
            let wornKey = keys.worn(claim.source, by: claim.accessory)
            let wornRevision = worn[wornKey] ?? 0
            while !Task.isCancelled {
                if claim.kind == .mostRecentlyWorn {
                    let prefix = keys.wornListings(claim.source)
                    guard let listings = await attempt("device-claim", { [store] in try await store.read(prefix: prefix) }) else {
                        return
                    }
                    if let latest = listings.entries.max(by: { $0.modRevision < $1.modRevision }), latest.key != wornKey {
                        report(slot, .withdrawn(claim.source))
                        return
                    }
                }
                guard let current = await attempt("device-claim", { [store] in try await store.get(key) }) else { return }
                if let current, let holder = DeviceHolder(parsing: current.value) {
                    if holder.slot == slot, holder.accessory == claim.accessory.rawValue {
                        held[claim.source] = current.modRevision
                        report(slot, .claimed(claim.source, holder, revision: current.modRevision))
                        return
                    }
                    let refused =
                        switch claim.kind {
                        case .takeOver: false
                        case .mostRecentlyWorn: holder.slot != slot && holder.wornRevision >= wornRevision
                        case .ifFree: holder.slot != slot
                        }
                    if refused {
                        report(slot, .refused(claim.source, holder, revision: current.modRevision))
                        return
                    }
                }
                let mine = DeviceHolder(slot: slot, wornRevision: wornRevision, accessory: claim.accessory.rawValue)
                let transaction = CoordinationTransaction(
                    conditions: [.init(key: key, modRevision: current?.modRevision ?? 0)],
                    puts: [.init(key: key, value: mine.description, lease: lease)])
                guard let committed = await attempt("device-claim", { [store] in try await store.commit(transaction) }) else { return }
                if let revision = committed {
                    held[claim.source] = revision
                    logger.info(
                        "holds a shared device",
                        metadata: ["source.id": "\(claim.source)", "accessory.id": "\(claim.accessory)", "epoch": "\(revision)"])
                    report(slot, .claimed(claim.source, mine, revision: revision))
                    return
                }
            }
        }

        /// Deletes the holder key if it is still the one this slot wrote at `epoch`.
        mutating func release(_ device: BluetoothAddress, epoch: UInt64) async {
            held[device] = nil
            let transaction = CoordinationTransaction(
                conditions: [.init(key: keys.holder(device), modRevision: epoch)], deletes: [keys.holder(device)])
            _ = await attempt("device-release", { [store] in try await store.commit(transaction) }, tries: 3)
        }

        /// Runs an etcd call until it answers (pausing between tries), at most `tries` times; `nil` if it never did
        /// or the slot stopped.
        private func attempt<T: Sendable>(
            _ call: String, _ body: @Sendable () async throws -> T, tries: Int = .max
        ) async -> T? {
            var delay = Duration.milliseconds(100)
            for _ in 0..<tries {
                let started = ContinuousClock.now
                do {
                    let result = try await body()
                    metrics.etcdRoundTrip[call]?.recordNanoseconds((ContinuousClock.now - started).nanoseconds)
                    return result
                } catch {
                    metrics.etcdFailures[call]?.increment()
                    logger.warning("an etcd call about a shared device failed", metadata: ["call": "\(call)", "error": "\(error)"])
                }
                guard (try? await Task.sleep(for: delay)) != nil else { return nil }
                delay = min(delay * 2, .seconds(2))
            }
            return nil
        }
    }
}
