import AccessoryBridge
import AccessoryModel
import Cluster
import CoreMetrics
import Logging
import Metrics
import MQTTClient
import ServiceLifecycle
import Synchronization

/// The member's state machine and the task that runs it: events in, actions performed.
extension ClusterService {
    /// The state machine and what runs it: owned by ``run()``'s task.
    struct Loop {
        let service: ClusterService
        let post: AsyncStream<Event>.Continuation
        var machine: ClusterStateMachine
        /// The shared devices, as etcd says: what the slots served here must hear of them.
        var directory = SharedDeviceDirectory()
        /// The slots served here (from their start to their stop): where the directory's news go.
        var links: [Int: SlotLink] = [:]
        /// What concerns one slot runs in order: each step waits for the one before.
        var slotChains: [Int: Task<Void, Never>] = [:]
        var watcher: Task<Void, Never>?
        /// The lease the member acts under, from its registration until the fence drops.
        var session: LeaseSession?
        var shuttingDown = false
        var finished = false
        /// Why the member refused to take part, once it did.
        var refusal: String?
        /// A graceful shutdown was asked for (or a refusal): no round follows this one.
        var stopping = false
        /// The cluster's slot count in this round: the one given, or once registered the recorded one.
        var slots: ClusterSlots { ClusterSlots(machine.slotCount)! }

        init(service: ClusterService, post: AsyncStream<Event>.Continuation, slots: ClusterSlots) {
            self.service = service
            self.post = post
            machine = ClusterStateMachine(
                member: service.configuration.member, slotCount: slots.count,
                followsRecordedCount: service.configuration.slots == nil, policy: service.configuration.policy)
        }

        mutating func run(_ events: AsyncStream<Event>) async {
            service.logger.info(
                "joining the cluster",
                metadata: [
                    "cluster.name": "\(service.configuration.name)", "cluster.slots": "\(slots.count)",
                    "etcd": "\(service.configuration.endpoint)",
                ])
            await perform(machine.start(at: .now))
            showState()
            for await event in events {
                await perform(handle(event))
                // Once a tick rather than after every event: it walks every slot, and a member taking up a thousand
                // slots handles a few thousand events meanwhile.
                if case .tick = event { showState() }
                if finished { break }
            }
            showState()
            watcher?.cancel()
        }

        /// Warns when the open-file limit is below what serving every slot of the cluster's count would take (a member
        /// alone, or after its peers' failures); checked at each registration, once the count is known.
        private func checkOpenFileLimit() {
            let needed = OpenFileLimit.needed(
                forSlots: machine.slotCount, starting: service.configuration.policy.concurrentTakeovers)
            guard let limit = OpenFileLimit.current(), limit < needed else { return }
            service.logger.warning(
                """
                the open-file limit is below what this member needs to serve every slot: raise the hard limit \
                (LimitNOFILE= in a systemd unit, --ulimit nofile= for a container)
                """,
                metadata: ["limit": "\(limit)", "needed": "\(needed)", "cluster.slots": "\(machine.slotCount)"])
        }

        /// What the member serves, and why not more, for `/health/ready` and the metrics: at most a tick
        /// (``ClusterService/tickInterval``) late.
        private func showState() {
            service.health.withLock { $0.reasons = machine.notReadyBecause }
            service.metrics.slotsOwned.record(machine.servingCount)
            service.metrics.members.record(machine.members.count)
        }

        private mutating func handle(_ event: Event) -> [ClusterStateMachine.Action] {
            let now = ContinuousClock.now
            switch event {
            case .tick:
                return machine.tick(at: now)
            case .leaseGranted(let lease, let sentAt):
                service.logger.info("etcd granted a lease", metadata: ["lease": "\(lease)"])
                return machine.leaseGranted(lease, sentAt: sentAt, at: now)
            case .keepAliveAnswered(let alive, let sentAt):
                if !alive { service.logger.warning("the lease expired: every slot stops, and the member joins again") }
                return machine.keepAliveAnswered(alive: alive, sentAt: sentAt, at: now)
            case .registered(let layout):
                let given = machine.slotCount
                let actions = machine.registered(layout: layout, at: now)
                if machine.slotCount != given {
                    service.logger.info(
                        "joining with the slot count the cluster recorded (no --slots was given)",
                        metadata: ["cluster.slots": "\(machine.slotCount)"])
                }
                checkOpenFileLimit()
                if let count = machine.leftForReshard {
                    shuttingDown = true
                    service.logger.info(
                        "the cluster is being resharded: the member joins once the reshard has ended",
                        metadata: ["cluster.slots": "\(count.count)"])
                }
                return actions
            case .loaded(let members, let claims, let devices):
                service.logger.info(
                    "read the cluster",
                    metadata: [
                        "members": "\(members.sorted())", "claimed_slots": "\(claims.count)",
                        "shared_devices": "\(devices.shared.count)",
                    ])
                tell(directory.loaded(shared: devices.shared, holders: devices.holders, at: devices.revision))
                return machine.loaded(members: members, claims: claims, at: now)
            case .changes(let changes):
                return changes.flatMap { apply($0, at: now) }
            case .claimed(let slot, let epoch):
                return machine.claimed(slot, epoch: epoch, at: now)
            case .claimRefused(let slot, let holder, let epoch):
                service.metrics.fenceRejections["claim"]?.increment()
                return machine.claimRefused(slot, holder: holder, epoch: epoch, at: now)
            case .claimFailed(let slot):
                return machine.claimFailed(slot, at: now)
            case .slotStarted(let slot, let epoch):
                guard machine.holdings[slot] == .starting(epoch: epoch) else { return [] }
                return machine.slotStarted(slot, at: now)
            case .slotEnded(let slot, let epoch, let error):
                service.logger.error("a slot's bridge ended by itself", metadata: ["slot": "\(slot)", "error": "\(error)"])
                return machine.slotEnded(slot, epoch: epoch, at: now)
            case .released(let slot):
                return machine.released(slot, at: now)
            case .etcdFailed:
                return machine.etcdFailed(at: now)
            case .deviceAnswer(let slot, let answer):
                switch answer {
                case .listed(let device, let listers, let revision):
                    tell(directory.listed(device, by: slot, listers: listers, at: revision))
                case .claimed(let device, let holder, let revision):
                    service.metrics.deviceClaims["claimed"]?.increment()
                    tell(directory.claimed(device, by: slot, holder: holder, at: revision))
                case .refused(let device, let holder, let revision):
                    service.metrics.deviceClaims["refused"]?.increment()
                    tell(directory.refused(device, to: slot, holder: holder, at: revision))
                case .withdrawn(let device):
                    service.metrics.deviceClaims["withdrawn"]?.increment()
                    tell([.init(slot: slot, .claimWithdrawn(device))])
                }
                return []
            case .shutdown:
                shuttingDown = true
                stopping = true
                service.logger.info("leaving the cluster: every slot stops, then the lease is revoked")
                return machine.shutdown(at: now)
            }
        }

        /// A change the watch saw: a member or a claim that came or went.
        private mutating func apply(_ change: CoordinationChange, at now: ContinuousClock.Instant) -> [ClusterStateMachine.Action] {
            switch change {
            case .put(let entry):
                switch service.keys.subject(of: entry.key) {
                case .layout?:
                    // Read when the member joins; while a reshard moves the states, the member leaves.
                    let actions = machine.layoutChanged(entry.value, at: now)
                    if let count = machine.leftForReshard, !actions.isEmpty {
                        shuttingDown = true
                        service.logger.info(
                            """
                            the cluster is being resharded: every slot stops, the lease is revoked, and the member joins \
                            again with the new count once the reshard has ended
                            """,
                            metadata: ["cluster.slots": "\(count.count)"])
                    }
                    return actions
                case .member(let name)?:
                    if !machine.members.contains(name) { service.logger.info("a member joined", metadata: ["member": "\(name)"]) }
                    return machine.memberJoined(name, at: now)
                case .slot(let slot)?:
                    return machine.slotClaimed(slot, by: entry.value, epoch: entry.createRevision, at: now)
                case .shared(let device)?:
                    tell(directory.listersChanged(device, to: ListerSlots(parsing: entry.value).slots, at: entry.modRevision))
                    return []
                case .holder(let device)?:
                    tell(directory.holderChanged(device, to: DeviceHolder(parsing: entry.value), at: entry.modRevision))
                    return []
                case nil:
                    return []
                }
            case .delete(let key, let revision):
                switch service.keys.subject(of: key) {
                case .layout?:
                    return []
                case .member(let name)?:
                    service.logger.info("a member left", metadata: ["member": "\(name)"])
                    return machine.memberLeft(name, at: now)
                case .slot(let slot)?:
                    return machine.slotReleased(slot, revision: revision, at: now)
                case .shared(let device)?:
                    tell(directory.listersChanged(device, to: nil, at: revision))
                    return []
                case .holder(let device)?:
                    tell(directory.holderChanged(device, to: nil, at: revision))
                    return []
                case nil:
                    return []
                }
            }
        }

        /// Hands the directory's news to the slots served here, each slot's in order.
        private func tell(_ notices: [SharedDeviceDirectory.Notice]) {
            guard !notices.isEmpty else { return }
            for (slot, events) in Dictionary(grouping: notices, by: \.slot) {
                links[slot]?.link.post(events.map(\.event))
            }
        }

        private mutating func perform(_ actions: [ClusterStateMachine.Action]) async {
            for action in actions {
                await perform(action)
            }
        }

        private mutating func perform(_ action: ClusterStateMachine.Action) async {
            let (service, post, store, keys) = (service, post, service.store, service.keys)
            let member = service.configuration.member
            switch action {
            case .grantLease(let ttl):
                Task {
                    let sentAt = ContinuousClock.now
                    if let lease = await service.timed("grant", { try await store.grantLease(ttl: ttl) }) {
                        post.yield(.leaseGranted(lease, sentAt: sentAt))
                    } else {
                        post.yield(.etcdFailed)
                    }
                }
            case .keepAlive(let lease):
                Task {
                    let sentAt = ContinuousClock.now
                    if let alive = await service.timed("keepalive", { try await store.keepAlive(lease) }) {
                        post.yield(.keepAliveAnswered(alive: alive, sentAt: sentAt))
                    } else {
                        post.yield(.etcdFailed)
                    }
                }
            case .register(let lease, let replacing):
                session?.close()
                let session = LeaseSession(lease: lease)
                self.session = session
                let slots = "\(self.slots.count)"
                Task {
                    let layout: String?? = await service.timed("register") {
                        if let replacing { try await store.revoke(replacing) }
                        // The cluster's slot count, if this is its first member.
                        _ = try await store.commit(
                            CoordinationTransaction(
                                conditions: [.init(key: keys.layout, modRevision: 0)],
                                puts: [.init(key: keys.layout, value: slots, lifetime: .untilDeleted)]),
                            in: session)
                        return try await store.get(keys.layout, in: session)?.value
                    }
                    post.yield(layout.map { .registered(layout: $0) } ?? .etcdFailed)
                }
            case .load:
                watcher?.cancel()
                guard let session else { return }
                watcher = Task { await service.watch(in: session, post: post) }
            case .claim(let slot, let lease):
                guard let session, session.lease == lease else { return }
                chain(slot) {
                    switch await service.timed("claim", { try await store.create(keys.slot(slot), value: member, in: session) }) {
                    case .created(let revision)?:
                        service.logger.info("claimed a slot", metadata: ["slot": "\(slot)", "epoch": "\(revision)"])
                        post.yield(.claimed(slot, epoch: revision))
                    case .exists(let entry)?:
                        post.yield(.claimRefused(slot, holder: entry.value, epoch: entry.createRevision))
                    case nil:
                        post.yield(.claimFailed(slot))
                    }
                }
            case .release(let slot, let epoch):
                guard let session else {
                    post.yield(.released(slot))
                    return
                }
                let retry = machine.policy.retry
                chain(slot) {
                    // Tried for the retry policy's patience: a claim left behind keeps the slot from its new owner
                    // only until this member's lease ends, which an etcd that fails this long soon brings.
                    var deleted = false
                    for attempt in 1...retry.triesBeforeGivingUp {
                        if await service.timed("release", { try await store.delete(keys.slot(slot), createdAt: epoch, in: session) }) != nil {
                            deleted = true
                            break
                        }
                        try? await Task.sleep(for: retry.delay(after: attempt))
                    }
                    if deleted {
                        service.logger.info("released a slot", metadata: ["slot": "\(slot)", "epoch": "\(epoch)"])
                    } else {
                        service.logger.warning(
                            "could not release a slot: etcd did not answer; its claim ends with this member's lease",
                            metadata: ["slot": "\(slot)", "epoch": "\(epoch)"])
                    }
                    post.yield(.released(slot))
                }
            case .startSlot(let slot, let epoch):
                guard let session else { return }
                service.metrics.takeovers.increment()
                // The slot's link exists from here on, so that no news of its devices is missed; what it must know
                // already waits in it for the processor.
                let devices = SlotDevices(
                    slot: slot, store: store, keys: keys, session: session, retry: machine.policy.retry,
                    logger: service.logger, metrics: service.metrics, report: { post.yield(.deviceAnswer($0, $1)) })
                let link = SharedDeviceLink(send: { devices.send($0) })
                links[slot] = SlotLink(link: link, devices: devices)
                link.post(directory.slotStarted(slot).map(\.event))
                let slots = self.slots
                chain(slot) { service.startSlot(slot, of: slots, epoch: epoch, sharedDevices: link, post: post) }
            case .stopSlot(let slot, let reason):
                service.metrics.stops[reason]?.increment()
                directory.slotStopped(slot)
                let devices = links.removeValue(forKey: slot)?.devices
                chain(slot) {
                    await service.stopSlot(slot, reason: reason)
                    // Its etcd requests end beside what comes next: etcd may be unreachable (a fenced slot), and a
                    // slot started again here does not wait for them (a release compares the revision it claimed).
                    if let devices { Task { await devices.finish(keys: keys) } }
                }
            case .fence(let until):
                service.fence.withLock { $0 = until }
                service.metrics.leaseFresh.record(until == nil ? 0 : 1)
                if until == nil {
                    // The lease may be gone: nothing more is done under it.
                    session?.close()
                    session = nil
                }
            case .revokeLease(let lease):
                if shuttingDown {
                    // The slots stop first: nobody takes them over while this member still publishes for them.
                    for chain in slotChains.values { await chain.value }
                    _ = await service.timed("revoke") { try await store.revoke(lease) }
                    service.logger.info("left the cluster", metadata: ["lease": "\(lease)"])
                } else {
                    Task { _ = await service.timed("revoke") { try await store.revoke(lease) } }
                }
            case .finish:
                for chain in slotChains.values { await chain.value }
                finished = true
            case .refuse(let reason):
                service.logger.error("this member does not take part in the cluster", metadata: ["reason": "\(reason)"])
                refusal = reason
                shuttingDown = true
                stopping = true
            }
        }

        /// Runs `step` after what came before for `slot`.
        private mutating func chain(_ slot: Int, _ step: @escaping @Sendable () async -> Void) {
            let previous = slotChains[slot]
            slotChains[slot] = Task {
                await previous?.value
                await step()
            }
        }
    }
}
