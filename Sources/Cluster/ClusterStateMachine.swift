import AccessoryModel

/// One bridge's part in a cluster (docs/scale-out.md), as a pure state machine: what etcd and the slots report, and
/// the time, go in; what to ask etcd and which slots to start or stop come out, in order. The shell
/// (`BridgeCluster`'s ClusterService) runs the actions and reports their outcomes as events; nothing here touches the
/// network or reads a clock.
///
/// - Membership: a lease (``Policy/leaseTTL``) kept alive every ``Policy/keepAliveInterval``, and a member key bound
///   to it (``ClusterKeys``). The first member records the cluster's slot count. A member told to follow it
///   (``followsRecordedCount``) takes the recorded count; one given another refuses to take part before its key is
///   put (``Action/refuse(reason:)``).
/// - Assignment: ``Rendezvous`` over the live members. A slot is claimed (create-if-absent, on the lease) when it is
///   this member's and nobody holds it; the claim's revision is its epoch. A slot that rendezvous gives to another
///   live member is stopped, then released at once (handover).
/// - Pacing: at most ``Policy/concurrentTakeovers`` slots are claimed or starting at once; the others wait their turn,
///   in slot order, and each one that serves (or is refused, or ends) lets the next in.
/// - Self-fencing: the slots' connections may be made only until ``fenceUntil``: the send time of the last keep-alive
///   etcd acknowledged, plus the TTL, less ``Policy/fenceMargin``. Past it, every slot stops before the lease can
///   have expired, and the member starts over with a new lease (revoking the old one once etcd answers again).
/// - Failures: what etcd did not answer is tried again, and a slot whose bridge ended by itself starts again, after the
///   one ``RetryPolicy`` (``Policy/retry``).
public struct ClusterStateMachine: Sendable {
    public struct Policy: Hashable, Sendable {
        /// The lease's time to live (etcd's minimum is 2 s).
        public var leaseTTL: Duration = .seconds(2)
        /// How often the lease is kept alive: well inside the TTL.
        public var keepAliveInterval: Duration = .milliseconds(500)
        /// How long before the lease could have expired the member stops acting.
        public var fenceMargin: Duration = .milliseconds(500)
        /// How what etcd did not answer is tried again (a grant, a registration, a read, a claim; and, in the
        /// shell, a slot's requests about its devices and the releases), and how long a slot whose bridge ended by
        /// itself waits before it starts again: the cluster's one retry policy.
        public var retry = RetryPolicy()
        /// How many slots the member takes up at once (claiming, starting, or waiting to start again after their
        /// bridge ended); the rest wait until one of them serves. A slot's start connects four MQTT sessions and reads its retained states: a member that
        /// starts a thousand at once (alone in a cluster of 1,024 slots, or taking a dead member's share over)
        /// starves its own keep-alive of CPU and etcd, and serves none of them for seconds. 32 keeps a failover at
        /// test scale (64 slots) in one step.
        public var concurrentTakeovers = 32

        public init() {}
    }

    public typealias Instant = ContinuousClock.Instant

    public enum Action: Hashable, Sendable {
        /// Grant a lease of this TTL; report ``leaseGranted(_:sentAt:at:)`` or ``etcdFailed(at:)``.
        case grantLease(ttl: Duration)
        /// Keep the lease alive; report ``keepAliveAnswered(alive:sentAt:at:)`` or ``etcdFailed(at:)``.
        case keepAlive(lease: Lease)
        /// Revoke the lease it `replaces` (one given up while etcd did not answer: its claims go at once, and its
        /// deletion of the member key cannot come after the new put), record the cluster's slot count
        /// (``ClusterKeys/layout``) if nobody has, and read it back; report ``registered(layout:at:)`` or
        /// ``etcdFailed(at:)``.
        case register(lease: Lease, replacing: Lease?)
        /// Put this member's key, bound to the lease; read the members and the slots' claims and watch them from there;
        /// report ``loaded(members:claims:at:)`` (again whenever the watch had to start over), then each change.
        case load
        /// Claim the slot on the lease (create-if-absent); report ``claimed(_:epoch:at:)`` or
        /// ``claimRefused(_:holder:epoch:at:)`` (``claimFailed(_:at:)`` when etcd did not answer).
        case claim(slot: Int, lease: Lease)
        /// Delete this member's claim of the slot (if it is still the one of `epoch`); report ``released(_:at:)``.
        /// Comes after the slot's ``stopSlot(slot:reason:)``, which the shell finishes first.
        case release(slot: Int, epoch: UInt64)
        /// Serve the slot with this epoch: connect its session, rebuild it, serve; report ``slotStarted(_:at:)``.
        case startSlot(slot: Int, epoch: UInt64)
        /// Stop serving the slot: close its session, publish nothing more for it.
        case stopSlot(slot: Int, reason: StopReason)
        /// The slots' connections may be made until this time; `nil`: not at all, and the lease is no longer this
        /// member's to act under (its ``LeaseSession`` closes).
        case fence(until: Instant?)
        /// End a lease: etcd deletes the keys bound to it at once.
        case revokeLease(lease: Lease)
        /// Nothing more to do: the member left.
        case finish
        /// The member may not take part, for `reason`: it leaves (the actions that follow) and stops with this error.
        case refuse(reason: String)
    }

    public enum StopReason: String, Hashable, Sendable, CustomStringConvertible {
        /// Another live member owns it now.
        case handover
        /// The lease may expire: the member stops acting before it can.
        case fenced
        /// The member shuts down.
        case shutdown
        /// The cluster is being resharded: the member leaves, and joins again with the new count.
        case resharding
        /// Its bridge ended by itself (it could not connect for good, say): it starts again after a pause.
        case failed

        public var description: String { rawValue }
    }

    /// How this member holds a slot.
    public enum Holding: Hashable, Sendable {
        case claiming
        case starting(epoch: UInt64)
        case serving(epoch: UInt64)
        /// Its bridge ended by itself and was stopped: it starts again, with the same claim, at `at`.
        case restarting(epoch: UInt64, at: Instant)
        case releasing(epoch: UInt64)
    }

    /// Who holds a claimed slot, as etcd says, and the claim's epoch.
    public struct Claim: Hashable, Sendable {
        public var holder: String
        public var epoch: UInt64

        public init(holder: String, epoch: UInt64) {
            self.holder = holder
            self.epoch = epoch
        }
    }

    enum Phase: Hashable, Sendable {
        case idle
        case granting
        case registering(lease: Lease)
        case loading(lease: Lease)
        case running(lease: Lease)
        case stopped
    }

    public let policy: Policy
    public let member: String
    /// The cluster's slot count: the one given, or once registered the recorded one (``followsRecordedCount``).
    public private(set) var slotCount: Int
    /// Whether the member takes the slot count the cluster recorded (none was given it): ``slotCount`` is then only
    /// what a new cluster records.
    public let followsRecordedCount: Bool
    private(set) var phase = Phase.idle
    /// The send time of the last keep-alive (or grant) etcd acknowledged.
    private var acknowledgedSentAt: Instant?
    private var nextKeepAlive: Instant?
    private var keepAliveInFlight = false
    /// When a failed etcd call (grant, register, read) is tried again.
    private var retryAt: Instant?
    /// etcd's failures in a row since it last answered: how long the next pause is (``Policy/retry``).
    private var failures = 0
    /// How many times in a row each slot's bridge ended by itself: how long its next restart waits.
    private var slotFailures: [Int: Int] = [:]
    /// A lease given up while etcd did not answer: revoked once it does, which frees the claims bound to it.
    private var abandonedLease: Lease?
    /// The count of a reshard this member left for: it joins again with it once the reshard has ended.
    public private(set) var leftForReshard: ClusterSlots?
    /// The live members, as etcd says.
    public private(set) var members: Set<String> = [] {
        didSet { if members != oldValue { owners = Self.owners(of: slotCount, among: live) } }
    }
    /// Each slot's owner among the live members and this one (``Rendezvous``), kept as they change: a member of 1,024
    /// slots reconciles on every slot that serves.
    private var owners: [String]
    /// Who holds each claimed slot, as etcd says.
    public private(set) var claims: [Int: Claim] = [:]
    /// The revision at which each slot's claim was last seen deleted. A claim's refusal and the watch reach the
    /// member apart: a refusal that names a claim older than that delete was true before it, and is out of date.
    private var releasedAt: [Int: UInt64] = [:]
    /// The slots this member claims, starts, serves or releases.
    public private(set) var holdings: [Int: Holding] = [:]

    public init(member: String, slotCount: Int, followsRecordedCount: Bool = false, policy: Policy = Policy()) {
        precondition(slotCount > 0, "a cluster has at least one slot")
        self.member = member
        self.slotCount = slotCount
        self.followsRecordedCount = followsRecordedCount
        self.policy = policy
        owners = Self.owners(of: slotCount, among: [member])
    }

    /// The lease this member acts under, once granted.
    public var lease: Lease? {
        switch phase {
        case .registering(let lease), .loading(let lease), .running(let lease): lease
        case .idle, .granting, .stopped: nil
        }
    }

    /// Until when the slots' connections may be made: the lease cannot have expired before (`nil`: no lease).
    public var fenceUntil: Instant? {
        guard lease != nil, let sent = acknowledgedSentAt else { return nil }
        return sent + policy.leaseTTL - policy.fenceMargin
    }

    /// Why this member serves less than its share (empty when all is well), for `/health/ready`.
    public var notReadyBecause: [String] {
        switch phase {
        case .idle, .granting: return ["no etcd lease: is etcd reachable?"]
        case .registering, .loading: return ["joining the cluster"]
        case .stopped:
            return [leftForReshard.map { "the cluster is being resharded to \($0.count) slots" } ?? "left the cluster"]
        case .running:
            let moving = holdings.filter { if case .serving = $0.value { false } else { true } }.keys.sorted()
            let queued = waitingCount
            return (moving.isEmpty ? [] : ["taking over or handing over slots \(moving)"])
                + (queued == 0 ? [] : ["\(queued) slots waiting their turn to be taken over"])
        }
    }

    /// The slots served, with their epochs.
    public var serving: [Int: UInt64] {
        holdings.compactMapValues { if case .serving(let epoch) = $0 { epoch } else { nil } }
    }

    /// How many slots are served (``serving``'s count, without building it: asked after every event).
    public var servingCount: Int {
        holdings.values.count { if case .serving = $0 { true } else { false } }
    }

    /// When ``tick(at:)`` next has something to do.
    public var nextDeadline: Instant? {
        let restarts = holdings.values.lazy.compactMap { if case .restarting(_, let at) = $0 { at } else { nil } }.min()
        return [nextKeepAlive, retryAt, holdings.isEmpty ? nil : fenceUntil, restarts].compactMap { $0 }.min()
    }

    // MARK: - Events

    public mutating func start(at now: Instant) -> [Action] {
        guard phase == .idle else { return [] }
        phase = .granting
        return [.grantLease(ttl: policy.leaseTTL)]
    }

    /// etcd granted a lease, asked at `sentAt`.
    public mutating func leaseGranted(_ lease: Lease, sentAt: Instant, at now: Instant) -> [Action] {
        guard phase == .granting else { return [.revokeLease(lease: lease)] }
        phase = .registering(lease: lease)
        failures = 0
        acknowledgedSentAt = sentAt
        nextKeepAlive = sentAt + policy.keepAliveInterval
        retryAt = nil
        return [.fence(until: fenceUntil), .register(lease: lease, replacing: abandonedLease)]
    }

    /// Registered: `layout` is the slot count the cluster was created with, as recorded (`nil`: none). A member that
    /// follows it takes it; one given another refuses to take part before it is a member: its slots would be other
    /// hubs' than its peers'.
    public mutating func registered(layout: String? = nil, at now: Instant) -> [Action] {
        guard case .registering(let lease) = phase else { return [] }
        if let layout, let (recorded, resharding) = ReshardPlan.Recorded.parse(layout) {
            if resharding {
                // Its slots would rebuild before their states are there: it waits for the reshard, as the members do.
                leftForReshard = recorded
                return leave(at: now, reason: .resharding)
            }
            if followsRecordedCount, recorded.count != slotCount {
                slotCount = recorded.count
                owners = Self.owners(of: slotCount, among: live)
            }
        }
        if let layout, layout != "\(slotCount)" {
            let reason = """
                this cluster was created with \(layout) slots, and this member was given \(slotCount): every member, hub \
                and tool of a cluster uses the same --slots (docs/scale-out.md, "How many slots")
                """
            return [.refuse(reason: reason)] + shutdown(at: now)
        }
        abandonedLease = nil
        failures = 0
        phase = .loading(lease: lease)
        return [.load]
    }

    /// The members and claims as etcd has them, watched from here on: after ``Action/load``, and again whenever the
    /// watch started over.
    public mutating func loaded(members: Set<String>, claims: [Int: Claim], at now: Instant) -> [Action] {
        switch phase {
        case .loading(let lease): phase = .running(lease: lease)
        case .running: break
        case .idle, .granting, .registering, .stopped: return []
        }
        failures = 0
        self.members = members
        self.claims = claims.filter { (0..<slotCount).contains($0.key) }
        return reconcile()
    }

    public mutating func memberJoined(_ member: String, at now: Instant) -> [Action] {
        members.insert(member)
        return reconcile()
    }

    public mutating func memberLeft(_ member: String, at now: Instant) -> [Action] {
        members.remove(member)
        return reconcile()
    }

    public mutating func slotClaimed(_ slot: Int, by holder: String, epoch: UInt64, at now: Instant) -> [Action] {
        guard (0..<slotCount).contains(slot) else { return [] }
        claims[slot] = Claim(holder: holder, epoch: epoch)
        return reconcile()
    }

    /// `slot`'s claim was deleted, at `revision`.
    public mutating func slotReleased(_ slot: Int, revision: UInt64, at now: Instant) -> [Action] {
        claims[slot] = nil
        releasedAt[slot] = max(releasedAt[slot] ?? 0, revision)
        return reconcile()
    }

    /// This member's claim of `slot` succeeded, with its epoch.
    public mutating func claimed(_ slot: Int, epoch: UInt64, at now: Instant) -> [Action] {
        guard holdings[slot] == .claiming, case .running = phase else {
            // Fenced or stopping meanwhile: let go of it again.
            return [.release(slot: slot, epoch: epoch)]
        }
        claims[slot] = Claim(holder: member, epoch: epoch)
        if owners[slot] != member {
            // Its owner joined while the claim was on its way (a member that came back with a new lease): the slot is
            // let go unstarted, and its owner claims it once the claim is deleted.
            holdings[slot] = .releasing(epoch: epoch)
            return [.release(slot: slot, epoch: epoch)] + reconcile()
        }
        holdings[slot] = .starting(epoch: epoch)
        return [.startSlot(slot: slot, epoch: epoch)]
    }

    /// Another claim holds `slot`.
    public mutating func claimRefused(_ slot: Int, holder: String, epoch: UInt64, at now: Instant) -> [Action] {
        if holdings[slot] == .claiming { holdings[slot] = nil }
        // Unless the watch said that claim was deleted since: then the slot is free, and no later change would say so.
        if (releasedAt[slot] ?? 0) <= epoch { claims[slot] = Claim(holder: holder, epoch: epoch) }
        return reconcile()
    }

    /// etcd did not answer a claim: tried again at the next change, or the next tick.
    public mutating func claimFailed(_ slot: Int, at now: Instant) -> [Action] {
        if holdings[slot] == .claiming { holdings[slot] = nil }
        return etcdFailed(at: now)
    }

    /// The slot serves: rebuilt and reading.
    public mutating func slotStarted(_ slot: Int, at now: Instant) -> [Action] {
        guard case .starting(let epoch) = holdings[slot] else { return [] }
        holdings[slot] = .serving(epoch: epoch)
        slotFailures[slot] = nil
        return reconcile()
    }

    /// The slot's bridge of `epoch` ended by itself (it could not connect for good, say): it is stopped, and starts
    /// again with the same claim after the retry policy's pause (longer each time it ends again before it serves),
    /// unless this member let go of it meanwhile.
    public mutating func slotEnded(_ slot: Int, epoch: UInt64, at now: Instant) -> [Action] {
        guard holdings[slot] == .starting(epoch: epoch) || holdings[slot] == .serving(epoch: epoch) else { return [] }
        let failures = (slotFailures[slot] ?? 0) + 1
        slotFailures[slot] = failures
        holdings[slot] = .restarting(epoch: epoch, at: now + policy.retry.delay(after: failures))
        return [.stopSlot(slot: slot, reason: .failed)] + reconcile()
    }

    /// This member's claim of `slot` is deleted (or was not its own any more).
    public mutating func released(_ slot: Int, at now: Instant) -> [Action] {
        if case .releasing = holdings[slot] { holdings[slot] = nil }
        if claims[slot]?.holder == member { claims[slot] = nil }
        return reconcile()
    }

    /// etcd answered a keep-alive sent at `sentAt`: the lease lives on (`alive`), or it expired.
    public mutating func keepAliveAnswered(alive: Bool, sentAt: Instant, at now: Instant) -> [Action] {
        keepAliveInFlight = false
        guard lease != nil else { return [] }
        guard alive else { return loseLease(reachable: true) }
        if acknowledgedSentAt.map({ sentAt > $0 }) ?? true { acknowledgedSentAt = sentAt }
        return [.fence(until: fenceUntil)]
    }

    /// An etcd call (grant, keep-alive, register, read) failed: unreachable, timed out. It is tried again later; the
    /// slots go on only while the lease can still be alive.
    public mutating func etcdFailed(at now: Instant) -> [Action] {
        keepAliveInFlight = false
        failures += 1
        retryAt = retryAt ?? now + policy.retry.delay(after: failures)
        return []
    }

    /// The time passed: a keep-alive may be due, a failed call to try again, or the fence's time up.
    public mutating func tick(at now: Instant) -> [Action] {
        var actions: [Action] = []
        if let fence = fenceUntil, now >= fence {
            // The lease may be gone any moment: stop acting now, and start over with a new one.
            actions += loseLease(reachable: false)
        }
        if let due = nextKeepAlive, now >= due, let lease, !keepAliveInFlight {
            keepAliveInFlight = true
            nextKeepAlive = now + policy.keepAliveInterval
            actions.append(.keepAlive(lease: lease))
        }
        if let due = retryAt, now >= due {
            retryAt = nil
            switch phase {
            case .granting: actions.append(.grantLease(ttl: policy.leaseTTL))
            case .registering(let lease): actions.append(.register(lease: lease, replacing: abandonedLease))
            case .loading: actions.append(.load)
            case .running: actions += reconcile()
            case .idle, .stopped: break
            }
        }
        // In slot order; only the slots due to start again are sorted (ticks come often, whatever the slot count).
        let restarts = holdings.compactMap { slot, holding -> (slot: Int, epoch: UInt64)? in
            guard case .restarting(let epoch, let at) = holding, now >= at else { return nil }
            return (slot, epoch)
        }
        for (slot, epoch) in restarts.sorted(by: { $0.slot < $1.slot }) {
            holdings[slot] = .starting(epoch: epoch)
            actions.append(.startSlot(slot: slot, epoch: epoch))
        }
        return actions
    }

    /// Graceful shutdown: every slot stops, then the lease is revoked, which deletes this member's key and claims at
    /// once: the other members take its slots over without waiting for the lease to expire.
    /// The cluster's recorded slot count changed (the watch): `N resharding` while `accessory-bridge reshard` moves
    /// the states. A running member leaves as a graceful shutdown does (every slot stops, the lease is revoked, which
    /// frees its claims), and ``leftForReshard`` says with which count to join again once the reshard has ended.
    /// Anything else (the end of a reshard, read by a member that joined meanwhile) changes nothing here.
    public mutating func layoutChanged(_ value: String, at now: Instant) -> [Action] {
        switch phase {
        case .loading, .running: break
        case .idle, .granting, .registering, .stopped: return []
        }
        guard let (count, resharding) = ReshardPlan.Recorded.parse(value), resharding else { return [] }
        leftForReshard = count
        return leave(at: now, reason: .resharding)
    }

    public mutating func shutdown(at now: Instant) -> [Action] {
        leave(at: now, reason: .shutdown)
    }

    private mutating func leave(at now: Instant, reason: StopReason) -> [Action] {
        let lease = self.lease
        var actions = running.map { Action.stopSlot(slot: $0, reason: reason) }
        holdings.removeAll()
        slotFailures.removeAll()
        phase = .stopped
        nextKeepAlive = nil
        retryAt = nil
        actions.append(.fence(until: nil))
        if let lease { actions.append(.revokeLease(lease: lease)) }
        actions.append(.finish)
        return actions
    }

    // MARK: - Helpers

    /// The slots started or serving (a slot being claimed has not started; one being released has stopped).
    private var running: [Int] {
        holdings.filter {
            switch $0.value {
            case .starting, .serving: true
            case .claiming, .restarting, .releasing: false
            }
        }.keys.sorted()
    }

    /// The lease is gone (etcd said so: `reachable`) or may be: every slot stops, and a new lease is asked for. One
    /// that etcd may still keep is revoked once it answers again.
    private mutating func loseLease(reachable: Bool) -> [Action] {
        if !reachable { abandonedLease = lease }
        var actions = running.map { Action.stopSlot(slot: $0, reason: .fenced) }
        holdings.removeAll()
        slotFailures.removeAll()
        claims = claims.filter { $0.value.holder != member }
        phase = .granting
        acknowledgedSentAt = nil
        nextKeepAlive = nil
        keepAliveInFlight = false
        retryAt = nil
        actions.append(.fence(until: nil))
        actions.append(.grantLease(ttl: policy.leaseTTL))
        return actions
    }

    /// Who may own a slot: the live members and this one (a slot this member does not own, a live other does).
    private var live: Set<String> { members.union([member]) }

    private static func owners(of slotCount: Int, among live: Set<String>) -> [String] {
        (0..<slotCount).map { Rendezvous.owner(of: $0, among: live)! }
    }

    /// How many slots this member owns and nobody holds: they wait for room to be claimed.
    private var waitingCount: Int {
        (0..<slotCount).count { owners[$0] == member && holdings[$0] == nil && claims[$0] == nil }
    }

    /// How many more slots may be taken up now (``Policy/concurrentTakeovers``): a slot waiting to start again keeps
    /// its room.
    private var takeoverRoom: Int {
        let busy = holdings.values.count(where: {
            switch $0 {
            case .claiming, .starting, .restarting: true
            case .serving, .releasing: false
            }
        })
        return policy.concurrentTakeovers - busy
    }

    /// Claims what is this member's and free, while there is room; hands over what another live member owns now.
    private mutating func reconcile() -> [Action] {
        guard case .running(let lease) = phase else { return [] }
        var room = takeoverRoom
        var actions: [Action] = []
        for slot in 0..<slotCount {
            if owners[slot] == member {
                if holdings[slot] == nil, claims[slot] == nil, room > 0 {
                    room -= 1
                    holdings[slot] = .claiming
                    actions.append(.claim(slot: slot, lease: lease))
                }
            } else {
                switch holdings[slot] {
                case .starting(let epoch), .serving(let epoch):
                    holdings[slot] = .releasing(epoch: epoch)
                    actions.append(.stopSlot(slot: slot, reason: .handover))
                    actions.append(.release(slot: slot, epoch: epoch))
                case .restarting(let epoch, _):
                    // Stopped already: only its claim is let go.
                    holdings[slot] = .releasing(epoch: epoch)
                    slotFailures[slot] = nil
                    actions.append(.release(slot: slot, epoch: epoch))
                case .claiming, .releasing, nil:
                    break
                }
            }
        }
        return actions
    }
}
