import AccessoryBridge
import AccessoryModel
import Cluster
import CoreMetrics
import Logging
import Metrics
import MQTTClient
import ServiceLifecycle
import Synchronization

/// A bridge as a member of a cluster (docs/scale-out.md): runs its ``ClusterStateMachine`` against etcd (a
/// ``CoordinationStore``) and serves the slots it owns, each an ``AccessoryBridgeService`` with a session of its own.
///
/// One task owns the state machine and handles one event at a time: etcd's answers, the watch's changes, the slots'
/// starts, and a tick every ``tickInterval``. What it asks of etcd runs beside it (a keep-alive never waits behind a
/// claim in this task, and the state machine's pacing keeps few claims ahead of it in the etcd client's connections);
/// what concerns one slot (claim, start, stop, release) runs in that slot's order. A slot's session may
/// connect only while the lease is fresh (``MQTTConfiguration/connectionGate``).
public final class ClusterService: Service {
    static let tickInterval = Duration.milliseconds(100)

    let configuration: ClusterConfiguration
    let bridge: BridgeConfiguration
    let store: any CoordinationStore
    let keys: ClusterKeys
    let logger: Logger
    let metricsFactory: any MetricsFactory
    let metrics: ClusterMetrics
    /// Until when the slots' connections may be made (the state machine's fence).
    let fence = Mutex<ContinuousClock.Instant?>(nil)
    /// What the member serves, and why not more: for `/health/ready`.
    let health = Mutex(Health())
    let running = Mutex<[Int: RunningSlot]>([:])
    /// The network threads every served slot's sessions share.
    let loops: MQTTLoopGroup

    struct Health {
        var reasons = ["not started"]
    }

    struct RunningSlot: Sendable {
        var epoch: UInt64
        var service: AccessoryBridgeService
        var task: Task<Void, Never>
    }

    /// A served slot's way to etcd about its playing devices: the link its processor talks through, and what runs
    /// its requests.
    struct SlotLink: Sendable {
        var link: SharedDeviceLink
        var devices: SlotDevices
    }

    /// What the state machine hears of, from etcd, the slots and the time.
    enum Event: Sendable {
        case tick
        case leaseGranted(Lease, sentAt: ContinuousClock.Instant)
        case keepAliveAnswered(alive: Bool, sentAt: ContinuousClock.Instant)
        /// With the slot count the cluster was created with, as recorded.
        case registered(layout: String?)
        case loaded(members: Set<String>, claims: [Int: ClusterStateMachine.Claim], devices: DeviceSnapshot)
        case changes([CoordinationChange])
        case claimed(Int, epoch: UInt64)
        case claimRefused(Int, holder: String, epoch: UInt64)
        case claimFailed(Int)
        case slotStarted(Int, epoch: UInt64)
        case slotEnded(Int, epoch: UInt64, error: String)
        case released(Int)
        case etcdFailed
        case shutdown
        /// What etcd answered to a slot's request about a playing device.
        case deviceAnswer(Int, SlotDeviceRequests.Answer)
    }

    /// The shared devices' keys as a read found them.
    struct DeviceSnapshot: Sendable {
        var shared: [BluetoothAddress: (listers: Set<Int>, revision: UInt64)] = [:]
        var holders: [BluetoothAddress: (holder: DeviceHolder, revision: UInt64)] = [:]
        var revision: UInt64 = 0
    }

    public init(
        configuration: ClusterConfiguration, bridge: BridgeConfiguration, store: any CoordinationStore, logger: Logger,
        metrics: any MetricsFactory = MetricsSystem.factory
    ) throws(MQTTError) {
        loops = try MQTTLoopGroup(count: configuration.networkLoops)
        self.configuration = configuration
        self.bridge = bridge
        self.store = store
        keys = ClusterKeys(cluster: configuration.name)
        var logger = logger
        logger[metadataKey: "cluster.member"] = "\(configuration.member)"
        self.logger = logger
        metricsFactory = metrics
        self.metrics = ClusterMetrics(factory: metrics)
    }

    /// The buckets of the cluster's histograms (etcd's round trips), by metric label.
    public static var histogramBuckets: [String: [Duration]] { ClusterMetrics.histogramBuckets }

    /// Why this member is not ready (empty when it serves its share): for `/health/ready`; callable from any thread.
    public var notReadyBecause: [String] {
        let reasons = health.withLock { $0.reasons }
        let slots = running.withLock { Array($0.values) }
        return reasons + slots.flatMap(\.service.notReadyBecause)
    }

    /// Takes part until a graceful shutdown. A reshard (docs/scale-out.md, "Changing the slot count") makes the
    /// member leave, wait until it has ended, and join again with the new count: each membership is a round of its
    /// own, with its own state machine and events (an old round's late answers go nowhere).
    public func run() async throws {
        var slots = configuration.slots ?? ClusterConfiguration.defaultSlots
        while true {
            let (events, post) = AsyncStream<Event>.makeStream()
            let ticker = Task {
                while !Task.isCancelled {
                    try? await Task.sleep(for: Self.tickInterval)
                    post.yield(.tick)
                }
            }
            var loop = Loop(service: self, post: post, slots: slots)
            await withGracefulShutdownHandler {
                await loop.run(events)
            } onGracefulShutdown: {
                post.yield(.shutdown)
            }
            ticker.cancel()
            post.finish()
            if let refusal = loop.refusal { throw Refusal(description: refusal) }
            guard !loop.stopping, let count = loop.machine.leftForReshard,
                let recorded = await waitForReshard(to: count)
            else { return }
            slots = recorded
        }
    }

    /// Polls the recorded count until no reshard is under way (`nil`: a graceful shutdown came first). Returns the
    /// count recorded then: the one to join with.
    func waitForReshard(to count: ClusterSlots) async -> ClusterSlots? {
        logger.info("waiting for the reshard to end, to join again", metadata: ["cluster.slots": "\(count.count)"])
        let (store, keys, logger) = (store, keys, logger)
        let waiting = Task { () -> ClusterSlots? in
            var session: LeaseSession?
            while !Task.isCancelled {
                do {
                    let current: LeaseSession
                    if let session {
                        current = session
                    } else {
                        current = LeaseSession(lease: try await store.grantLease(ttl: .seconds(10)))
                        session = current
                    }
                    if let value = try await store.get(keys.layout, in: current)?.value,
                        let (recorded, resharding) = ReshardPlan.Recorded.parse(value), !resharding
                    {
                        current.close()
                        try? await store.revoke(current.lease)
                        logger.info("the reshard has ended: joining again", metadata: ["cluster.slots": "\(recorded.count)"])
                        return recorded
                    }
                    if try await !store.keepAlive(current.lease) { session = nil }
                } catch {
                    logger.warning("could not read the cluster's slot count", metadata: ["error": "\(error)"])
                    session = nil
                }
                try? await Task.sleep(for: .milliseconds(250))
            }
            if let session { try? await store.revoke(session.lease) }
            return nil
        }
        return await withGracefulShutdownHandler {
            await waiting.value
        } onGracefulShutdown: {
            waiting.cancel()
        }
    }

    /// Why the member did not take part (it left the cluster first).
    public struct Refusal: Error, CustomStringConvertible {
        public var description: String
    }
}
