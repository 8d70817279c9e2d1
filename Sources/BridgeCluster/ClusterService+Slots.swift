import AccessoryBridge
import AccessoryModel
import Cluster
import CoreMetrics
import Logging
import Metrics
import MQTTClient
import ServiceLifecycle
import Synchronization

/// A member's slots (started, stopped, fenced) and its etcd watch.
extension ClusterService {
    // MARK: - Slots

    /// Why a slot's session may not connect now, or `nil`.
    func connectionRefusal() -> String? {
        let until = fence.withLock { $0 }
        guard let until, ContinuousClock.now < until else {
            metrics.fenceRejections["connection"]?.increment()
            return "this member's etcd lease may have expired: it does not act for the slot"
        }
        return nil
    }

    func startSlot(
        _ slot: Int, of slots: ClusterSlots, epoch: UInt64, sharedDevices: SharedDeviceLink,
        post: AsyncStream<Event>.Continuation
    ) {
        var configuration = bridge
        configuration.mqtt.clientID = self.configuration.clientID(of: slot)
        configuration.mqtt.connectionGate = { [weak self] in
            guard let self else { return "the member stopped" }
            return self.connectionRefusal()
        }
        let served = ServedSlot(ClusterSlot(slot, of: slots)!, epoch: epoch)
        let started = ContinuousClock.now
        let logger = logger
        let service: AccessoryBridgeService
        do {
            service = try AccessoryBridgeService(
                configuration: configuration, logger: logger, metrics: metricsFactory, slot: served,
                sharedDevices: sharedDevices, loops: loops,
                onServing: {
                    logger.info(
                        "serving a slot",
                        metadata: [
                            "slot": "\(slot)", "epoch": "\(epoch)",
                            "start_ms": "\((ContinuousClock.now - started).wholeMilliseconds)",
                        ])
                    post.yield(.slotStarted(slot, epoch: epoch))
                })
        } catch {
            post.yield(.slotEnded(slot, epoch: epoch, error: "\(error)"))
            return
        }
        let task = Task {
            do {
                try await service.run()
            } catch {
                post.yield(.slotEnded(slot, epoch: epoch, error: "\(error)"))
            }
        }
        running.withLock { $0[slot] = RunningSlot(epoch: epoch, service: service, task: task) }
    }

    /// Stops the slot's bridge and waits until it ended.
    func stopSlot(_ slot: Int, reason: ClusterStateMachine.StopReason) async {
        guard let running = running.withLock({ $0.removeValue(forKey: slot) }) else { return }
        running.service.stop()
        await running.task.value
        logger.info("stopped a slot", metadata: ["slot": "\(slot)", "epoch": "\(running.epoch)", "reason": "\(reason)"])
    }

    // MARK: - etcd

    /// Puts this member's key, then reads the cluster and watches it from there, reading again whenever the watch
    /// breaks, until cancelled or the session closes.
    func watch(in session: LeaseSession, post: AsyncStream<Event>.Continuation) async {
        let retry = configuration.policy.retry
        var failures = 0
        let member = configuration.member
        while !Task.isCancelled, session.isOurs,
            await timed("register", { try await self.store.put(self.keys.member(member), value: member, in: session) }) == nil
        {
            failures += 1
            try? await Task.sleep(for: retry.delay(after: failures))
        }
        failures = 0
        while !Task.isCancelled, session.isOurs {
            guard let snapshot = await timed("read", { try await self.store.read(prefix: self.keys.prefix, in: session) }) else {
                failures += 1
                try? await Task.sleep(for: retry.delay(after: failures))
                continue
            }
            failures = 0
            var members = Set<String>()
            var claims: [Int: ClusterStateMachine.Claim] = [:]
            var devices = DeviceSnapshot(revision: UInt64(max(0, snapshot.revision)))
            for entry in snapshot.entries {
                switch keys.subject(of: entry.key) {
                case .layout?: break
                case .member(let name)?: members.insert(name)
                case .slot(let slot)?: claims[slot] = .init(holder: entry.value, epoch: entry.createRevision)
                case .shared(let device)?:
                    devices.shared[device] = (ListerSlots(parsing: entry.value).slots, entry.modRevision)
                case .holder(let device)?:
                    if let holder = DeviceHolder(parsing: entry.value) {
                        devices.holders[device] = (holder, entry.modRevision)
                    }
                case nil: break
                }
            }
            post.yield(.loaded(members: members, claims: claims, devices: devices))
            do {
                for try await changes in store.watch(prefix: keys.prefix, after: snapshot.revision) {
                    post.yield(.changes(changes))
                }
            } catch {
                if !Task.isCancelled { logger.warning("the etcd watch broke; reading again", metadata: ["error": "\(error)"]) }
            }
            try? await Task.sleep(for: retry.first)
        }
    }

    /// Runs one etcd call, timing it; `nil` when it failed (logged and counted).
    func timed<T: Sendable>(_ call: String, _ body: @Sendable () async throws -> T) async -> T? {
        let started = ContinuousClock.now
        do {
            let result = try await body()
            metrics.etcdRoundTrip[call]?.record(duration: ContinuousClock.now - started)
            return result
        } catch {
            metrics.etcdFailures[call]?.increment()
            logger.warning("an etcd call failed", metadata: ["call": "\(call)", "error": "\(error)"])
            return nil
        }
    }
}
