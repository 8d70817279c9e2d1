import AccessoryModel

/// Everything the bridge decides, as one pure state machine: each event and the time go in, the actions to run come
/// out (``BridgeAction``), in order. It owns every accessory (``AccessoryStateMachine``'s semantics, ownership by
/// hub, sequences), the routing engine, the rate limit of rebirth requests, the deadlines, and what could not be sent.
///
/// It never reads a clock and performs no I/O: the bridge decodes a message, calls one transition, and publishes
/// what comes back (postgres-nio's `ConnectionStateMachine` is the model). One owner calls it, one event at a time.
///
/// Its state is a function of the events of its accessories and sources alone, so the accessories of a fleet are
/// split between several machines in a cluster: one per cluster slot (``ClusterSlot``), each with its own MQTT
/// session, which refuses the hubs of other slots and says which playing devices' states to read
/// (``BridgeAction/watchSource(_:)``). A slot's machine also holds back what would show a new listing before etcd has
/// it (its ``ListingGate``): the shell only reports etcd's answers (``sharedDevice(_:at:)``) and runs what comes out,
/// then what the gate lets go (``nextReleased(at:)``).
public struct BridgeStateMachine: Sendable {
    /// Limits and timings.
    public struct Policy: Hashable, Sendable {
        public var accessory = AccessoryStateMachine.Policy()
        public var routing = RoutingEngine.Policy()
        /// At most one rebirth request per accessory per interval, however many gaps its telemetry shows.
        public var rebirthInterval: Duration = .seconds(10)
        /// How long a hub may be offline before its accessories turn stale (and rule 1 releases their routes): a hub
        /// back within it (a broker restart, a network blip, its own reconnection) changes nothing, and the playing
        /// devices keep playing. Zero: at once.
        public var hubOfflineGrace: Duration = .seconds(10)

        public init() {}
    }

    public let policy: Policy
    private var store = AccessoryStore()
    private var routing: RoutingEngine
    private var agenda = Agenda()
    /// When each accessory's hub was last asked for a rebirth (only recent ones are kept).
    private var rebirths = RecentRebirths()
    /// Accessories whose latest state could not be published, to publish on reconnection.
    private var unpublished: Set<AccessoryID> = []
    /// Those being published again, a batch at a time, the next one last (``publishingResumed(at:statesAtMost:)``).
    private var republishing: [AccessoryID] = []
    /// Hubs whose retained status says online.
    public private(set) var hubsOnline: Set<HubID> = []
    /// Hubs that said offline less than ``Policy/hubOfflineGrace`` ago, and when: their accessories are not stale yet.
    private var hubsGoingOffline: [HubID: Timestamp] = [:]
    /// In a cluster, the slot this machine serves: other slots' hubs are refused.
    public let slot: ClusterSlot?
    /// The ownership epoch every state and command carries (0 for a single bridge).
    public let epoch: UInt64
    /// In a cluster, the playing devices the accessories list: the slot reads their states only.
    private var listed: ListedSources?
    /// In a cluster, what waits until etcd has the slot's new listings.
    private var gate: ListingGate?
    /// Head-tracking sessions were taken back from the retained states: the first publishing checks them.
    private var headTrackingRestored = false
    /// The latest session news of each accessory that could not be sent, to send when publishing resumes.
    private var owedHeadTracking: [AccessoryID: (HeadTrackingEvent, HubID)] = [:]

    /// What may wait behind the ``ListingGate``: every event that decides something.
    enum Event: Sendable {
        case telemetry(Result<AccessoryRequest, AccessoryControlError>, sequence: UInt64, hub: HubID, id: AccessoryID)
        case controls(Result<AccessoryControls, AccessoryControlError>, id: AccessoryID)
        case hubStatus(HubID, online: Bool)
        case sourceReported(SourceReport, source: BluetoothAddress)
        case sharedDevice(SharedDeviceEvent)
        case publishingResumed(statesAtMost: Int)
    }

    /// - Parameters:
    ///   - instanceID: distinguishes this run's command ids from other runs'.
    ///   - commandSequenceBase: commands are numbered from here up (see ``RoutingEngine/commandSequenceBase``).
    ///   - slot: in a cluster, the slot served (`nil`: one bridge serves every hub and reads every device).
    ///   - epoch: the slot's ownership epoch, carried by every state and command.
    ///   - sessionKey: what makes head-tracking session ids unguessable (``SessionKey``; the default is for tests).
    public init(
        policy: Policy = Policy(), instanceID: String, commandSequenceBase: UInt64 = 0, slot: ClusterSlot? = nil,
        epoch: UInt64 = 0, sessionKey: SessionKey = SessionKey(0, 0)
    ) {
        self.policy = policy
        self.slot = slot
        self.epoch = epoch
        listed = slot.map { _ in ListedSources() }
        gate = slot.map { _ in ListingGate() }
        routing = RoutingEngine(
            policy: policy.routing, instanceID: instanceID, commandSequenceBase: commandSequenceBase, epoch: epoch,
            sessionKey: sessionKey)
    }

    // MARK: - Queries

    /// What the bridge publishes about `id`, if it knows it.
    public func state(of id: AccessoryID) -> AccessoryState? {
        store[id].map(published)
    }

    /// How many accessories the bridge keeps.
    public var accessoryCount: Int { store.count }

    /// Counts for home automation and metrics, kept as the state changes (no walk over the accessories or sources).
    public struct Statistics: Hashable, Sendable {
        public var accessories = 0
        public var byRegistration: [Registration: Int] = [:]
        public var worn = 0
        public var routed = 0
        public var sourcesByActivity: [Activity: Int] = [:]

        public init(
            accessories: Int = 0, byRegistration: [Registration: Int] = [:], worn: Int = 0, routed: Int = 0,
            sourcesByActivity: [Activity: Int] = [:]
        ) {
            self.accessories = accessories
            self.byRegistration = byRegistration
            self.worn = worn
            self.routed = routed
            self.sourcesByActivity = sourcesByActivity
        }
    }

    public func statistics() -> Statistics {
        Statistics(
            accessories: store.count, byRegistration: store.registrations.dictionary, worn: store.wornCount,
            routed: routing.routeCount, sourcesByActivity: routing.sourcesByActivity)
    }

    /// Every accessory's id (to announce them all again, a slice at a time).
    public var accessoryIDs: [AccessoryID] { store.ids }

    /// Every accessory's state, made as it is read.
    public func allStates() -> some Sequence<AccessoryState> {
        store.all.lazy.map(published)
    }

    /// How many accessories and sources the routing engine keeps (see ``RoutingEngine/footprint``).
    public var routingFootprint: (accessories: Int, sources: Int) { routing.footprint }

    /// When ``tick(at:)`` next has something to do, if ever.
    public var nextDeadline: Timestamp? { agenda.earliest }

    /// In a cluster, the playing devices whose states the slot reads (after restoring: to subscribe to them all);
    /// empty for a single bridge, which reads every device's.
    public var watchedSources: [BluetoothAddress] { listed.map { Array($0.all) } ?? [] }

    /// Whether the bridge keeps anything of `hub`: an accessory was paired with it, or it says it is online. (What
    /// the I/O shell keeps of a hub, it keeps of these only: a request about an unknown accessory leaves nothing.)
    public func knows(_ hub: HubID) -> Bool {
        store.knows(hub) || hubsOnline.contains(hub)
    }

    /// Why `hub`'s messages do not belong here (another slot's hub), or `nil`.
    public func refusal(of hub: HubID) -> AccessoryControlError? {
        slot?.refusal(of: hub)
    }

    // MARK: - Events
    //
    // Each event that decides something goes through ``receive(_:at:)``: in a cluster's slot, the gate may make it
    // wait (then it returns nothing now, and the event is decided when ``nextReleased(at:)`` reaches it).

    /// One telemetry message from `hub` about accessory `id`: its request, or the error that answers it when the
    /// message could not be read as a request (then with the sequence it carried, or 0 when unreadable).
    ///
    /// Actions: the commands routing issues, the accessory's state when it changed, the answer, the states of other
    /// accessories whose route changed, and a rebirth request when the sequence shows a gap.
    /// Every telemetry and controls event is answered exactly once (``BridgeAction/answer(_:)``), in the order the
    /// events came, whether or not it waited: the shell matches answers to its requests in that order.
    public mutating func telemetry(
        _ request: Result<AccessoryRequest, AccessoryControlError>, sequence: UInt64, from hub: HubID,
        about id: AccessoryID, at now: Timestamp
    ) -> [BridgeAction] {
        receive(.telemetry(request, sequence: sequence, hub: hub, id: id), at: now)
    }

    private mutating func decideTelemetry(
        _ request: Result<AccessoryRequest, AccessoryControlError>, sequence: UInt64, from hub: HubID,
        about id: AccessoryID, at now: Timestamp
    ) -> [BridgeAction] {
        if let refusal = refusal(of: hub) {
            return [.answer(.init(.failed(refusal), state: nil))]
        }
        var machine = self.machine(for: id)
        let deadline = machine.nextDeadline
        let outcome = machine.process(request, sequence: sequence, from: hub, at: now)
        guard let accessory = machine.accessory else {
            // Only a pairing brings an accessory to life: a request about an unknown one leaves nothing behind.
            return [.answer(.init(outcome.result, state: nil))]
        }
        var actions: [BridgeAction] = []
        var rerouted: [AccessoryID] = []
        if outcome.stateChanged {
            save(accessory, into: &actions)
            if case .applied = outcome.result {
                rerouted = route(accessory, at: now, into: &actions)
            }
            scheduleDiagnostics(of: machine, before: deadline)
        }
        let state = published(accessory)
        if outcome.stateChanged {
            precondition(outcome.requesterOwns, "only the owner's request changes an accessory")
        }
        actions.append(
            .answer(.init(outcome.result, state: outcome.requesterOwns ? state : nil, publishesState: outcome.stateChanged)))
        publishStates(of: rerouted, except: id, into: &actions)
        if let missing = outcome.gap, rebirths.allow(id, at: now, interval: policy.rebirthInterval) {
            actions.append(
                .requestRebirth(
                    .init(hub: hub, accessory: id, lastSequence: missing.lowerBound - 1, receivedSequence: sequence)))
        }
        return actions
    }

    /// The person's controls of accessory `id`, from home automation (whoever may write the controls topic: the
    /// broker's roles decide), or the error that answers a message that could not be read as controls. Actions: the
    /// commands routing issues, the answer (with the state), other states whose route changed.
    public mutating func controls(
        _ request: Result<AccessoryControls, AccessoryControlError>, for id: AccessoryID, at now: Timestamp
    ) -> [BridgeAction] {
        receive(.controls(request, id: id), at: now)
    }

    private mutating func decideControls(
        _ request: Result<AccessoryControls, AccessoryControlError>, for id: AccessoryID, at now: Timestamp
    ) -> [BridgeAction] {
        var machine = self.machine(for: id)
        let accessory: Accessory
        do {
            accessory = try machine.setControls(request.get(), at: now)
        } catch {
            return [.answer(.init(.failed(error), state: nil))]
        }
        var actions: [BridgeAction] = []
        save(accessory, into: &actions)
        let rerouted = route(accessory, at: now, into: &actions)
        let state = published(accessory)
        actions.append(.answer(.init(.applied, state: state, publishesState: true)))
        publishStates(of: rerouted, except: id, into: &actions)
        return actions
    }

    /// A hub's retained status: its accessories turn stale once it has been offline for ``Policy/hubOfflineGrace``,
    /// and take part again when it is back (one back within the grace changes nothing).
    public mutating func hubStatus(_ hub: HubID, online: Bool, at now: Timestamp) -> [BridgeAction] {
        receive(.hubStatus(hub, online: online), at: now)
    }

    private mutating func decideHubStatus(_ hub: HubID, online: Bool, at now: Timestamp) -> [BridgeAction] {
        if online {
            hubsOnline.insert(hub)
            if hubsGoingOffline.removeValue(forKey: hub) != nil { return [] }
            return availabilityChanged(of: hub, online: true, at: now)
        }
        hubsOnline.remove(hub)
        guard policy.hubOfflineGrace > .zero else { return availabilityChanged(of: hub, online: false, at: now) }
        if hubsGoingOffline[hub] == nil {
            hubsGoingOffline[hub] = now
            agenda.schedule(.hubOffline(hub), at: now + policy.hubOfflineGrace)
        }
        return []
    }

    /// The accessories of `hub` turn stale (`online` false) or take part again.
    private mutating func availabilityChanged(of hub: HubID, online: Bool, at now: Timestamp) -> [BridgeAction] {
        var actions: [BridgeAction] = []
        var rerouted: [AccessoryID] = []
        for id in store.ids(of: hub) {
            var machine = self.machine(for: id)
            let deadline = machine.nextDeadline
            guard let accessory = machine.hubAvailabilityChanged(hub, online: online, at: now) else { continue }
            save(accessory, into: &actions)
            rerouted += route(accessory, at: now, into: &actions).filter { $0 != id }
            scheduleDiagnostics(of: machine, before: deadline)
            actions.append(.publishState(published(accessory)))
        }
        // Accessories whose route another one's change moved, once each, as they are now.
        var seen = Set<AccessoryID>()
        publishStates(of: rerouted.filter { seen.insert($0).inserted }, except: nil, into: &actions)
        return actions
    }

    /// A playing device's report of what it is doing.
    public mutating func sourceReported(_ report: SourceReport, from source: BluetoothAddress, at now: Timestamp)
        -> [BridgeAction]
    {
        receive(.sourceReported(report, source: source), at: now)
    }

    private mutating func decideSourceReport(
        _ report: SourceReport, from source: BluetoothAddress, at now: Timestamp
    ) -> [BridgeAction] {
        routed(routing.sourceReported(report, from: source, at: now))
    }

    /// In a cluster, what etcd said about a playing device that accessories of other slots list too: the commands
    /// of the decisions that waited for it, and the states of the accessories whose route moved. The answer to the
    /// slot's own listing (``SharedDeviceEvent/listed(_:shared:)``) ends the gate's wait for it; the event itself
    /// takes its turn. Then call ``nextReleased(at:)`` until it returns `nil`.
    public mutating func sharedDevice(_ event: SharedDeviceEvent, at now: Timestamp) -> [BridgeAction] {
        if case .listed(let source, _) = event { gate?.listed(source) }
        return receive(.sharedDevice(event), at: now)
    }

    private mutating func decideSharedDevice(_ event: SharedDeviceEvent, at now: Timestamp) -> [BridgeAction] {
        switch event {
        case .shared(let source, _), .listed(let source, _), .heldElsewhere(let source, _),
            .releasedElsewhere(let source):
            // News of a device the slot no longer lists is about a listing that ended: nothing to keep. (What the
            // slot claimed is still answered: a device it holds is let go.)
            if listed?.contains(source) == false { return [] }
        case .claimed, .claimRefused, .claimWithdrawn:
            break
        }
        return routed(routing.sharedDevice(event, at: now))
    }

    /// Lets time pass: raises the diagnostics that came due, closes resume windows, and in a cluster runs rule 6 again
    /// for a device it stood back for. While the gate holds, nothing comes due: the deadlines wait with the rest
    /// (``isHolding``).
    public mutating func tick(at now: Timestamp) -> [BridgeAction] {
        guard gate?.isHolding != true else { return [] }
        var actions: [BridgeAction] = []
        for owner in agenda.takeDue(at: now) {
            switch owner {
            case .routing:
                actions += routed(routing.tick(at: now))
            case .hubOffline(let hub):
                // Still offline since then: its accessories turn stale now.
                guard let since = hubsGoingOffline[hub], now >= since + policy.hubOfflineGrace else { continue }
                hubsGoingOffline[hub] = nil
                actions += availabilityChanged(of: hub, online: false, at: now)
            case .accessory(let id):
                var machine = self.machine(for: id)
                guard let accessory = machine.tick(at: now) else { continue }
                save(accessory, into: &actions)
                scheduleDiagnostics(of: machine, before: nil)
                actions.append(.publishState(published(accessory)))
            }
        }
        return actions
    }

    // MARK: - What could not be sent

    /// An action the shell could not run (the broker connection is down beyond the bound of what may wait for it).
    /// A command no longer counts as in force and is owed; a state is published again when publishing resumes (for
    /// the state an answer publishes, pass `.publishState` of it); a rebirth request may be asked again at once. An
    /// answer is not kept: the requester sends its request again.
    public mutating func notSent(_ action: BridgeAction) {
        switch action {
        case .sendCommand(let command): routing.commandNotSent(command)
        case .publishState(let state): unpublished.insert(state.accessory.id)
        case .requestRebirth(let rebirth): rebirths.forget(rebirth.accessory)
        case .headTracking(let event, let hub):
            // Owed: only the latest news of each accessory matters (an activation replaces whatever session the hub
            // and the host had for it; they drop what is older than what they took).
            owedHeadTracking[event.session.accessory] = (event, hub)
        case .answer, .watchSource, .unwatchSource, .noteWorn, .claimDevice, .releaseDevice, .continuePublishing:
            break
        }
    }

    /// Publishing works again — the broker connection is back, or the client's queue that refused messages has room
    /// again: the owed commands that still hold, and at most `limit` of the states that could not be published (in
    /// order of id). When more states wait, the actions end with ``BridgeAction/continuePublishing``: call it again
    /// once everything before went out, a batch at a time, so that the states of a whole fleet are never built at
    /// once when its queue overflowed.
    public mutating func publishingResumed(at now: Timestamp, statesAtMost limit: Int = .max) -> [BridgeAction] {
        receive(.publishingResumed(statesAtMost: limit), at: now)
    }

    private mutating func decidePublishingResumed(at now: Timestamp, statesAtMost limit: Int) -> [BridgeAction] {
        let output = routing.reconcile(at: now)
        var actions = self.actions(of: output)
        if !owedHeadTracking.isEmpty {
            let owed = owedHeadTracking.sorted { $0.key < $1.key }
            owedHeadTracking = [:]
            actions += owed.map { .headTracking($0.value.0, hub: $0.value.1) }
        }
        if headTrackingRestored {
            // The first time after restoring: sessions taken back that no longer follow their route end, and those
            // that should exist begin.
            headTrackingRestored = false
            let sessions = routing.reconcileHeadTracking(at: now)
            actions += self.actions(of: sessions)
            publishStates(of: sessions.rerouted, except: nil, into: &actions)
        }
        if republishing.isEmpty {
            republishing = unpublished.sorted(by: >)
            unpublished.removeAll()
        }
        let batch = Array(republishing.suffix(limit).reversed())
        republishing.removeLast(batch.count)
        // Emptied, it gives back its storage (an id for each state that waited, after an overflow).
        if republishing.isEmpty { republishing = [] }
        publishStates(of: batch, except: nil, into: &actions)
        if hasUnpublishedStates { actions.append(.continuePublishing) }
        return actions
    }

    /// Whether states that could not be published still wait for ``publishingResumed(at:statesAtMost:)``.
    public var hasUnpublishedStates: Bool { !republishing.isEmpty || !unpublished.isEmpty }

    // MARK: - The gate (a cluster's slot)

    /// Whether what comes now waits until etcd has the slot's new listings: the shell runs no deadline and announces
    /// nothing meanwhile (a single bridge never waits).
    public var isHolding: Bool { gate?.isHolding ?? false }

    /// What waited behind the gate and goes now, one decision at a time, in order: `nil` while etcd has not confirmed
    /// every listing, or when nothing waits. Call it after ``sharedDevice(_:at:)`` until it returns `nil`, running
    /// each batch of actions before asking for the next (so that what could not be sent is known before the next
    /// decision).
    public mutating func nextReleased(at now: Timestamp) -> [BridgeAction]? {
        guard let waiting = gate?.next() else { return nil }
        switch waiting {
        case .actions(let actions): return gate!.pass(Array(actions))
        case .event(let event): return gate!.pass(decide(event, at: now))
        }
    }

    /// An event: decided now, or held by the gate until its turn.
    private mutating func receive(_ event: Event, at now: Timestamp) -> [BridgeAction] {
        guard gate != nil else { return decide(event, at: now) }
        guard !gate!.isHolding else {
            gate!.hold(event)
            return []
        }
        return gate!.pass(decide(event, at: now))
    }

    private mutating func decide(_ event: Event, at now: Timestamp) -> [BridgeAction] {
        switch event {
        case .telemetry(let request, let sequence, let hub, let id):
            decideTelemetry(request, sequence: sequence, from: hub, about: id, at: now)
        case .controls(let request, let id): decideControls(request, for: id, at: now)
        case .hubStatus(let hub, let online): decideHubStatus(hub, online: online, at: now)
        case .sourceReported(let report, let source): decideSourceReport(report, from: source, at: now)
        case .sharedDevice(let event): decideSharedDevice(event, at: now)
        case .publishingResumed(let limit): decidePublishingResumed(at: now, statesAtMost: limit)
        }
    }

    // MARK: - Restoring

    /// Takes back an accessory as its retained state had it, before any event: nothing is published.
    public mutating func restore(_ state: AccessoryState, at now: Timestamp) {
        var nothing: [BridgeAction] = []
        save(state.accessory, into: &nothing, restoring: true)
        routing.restore(
            RoutingAccessory(state.accessory), routedSource: state.routedSource, headTracking: state.headTracking,
            at: now)
        if state.headTracking != nil || state.accessory.configuration.deviceCapabilities.contains(.headTracking) {
            // Sessions taken back are checked, and those that should exist (a graceful shutdown ended them) begin.
            headTrackingRestored = true
        }
        // From the state itself: reading it back from the store would convert it again.
        let machine = AccessoryStateMachine(restoring: state.accessory, policy: policy.accessory)
        scheduleDiagnostics(of: machine, before: nil)
    }

    /// Takes back a playing device's retained state, before any event: nothing is sent.
    public mutating func restoreSource(_ report: SourceReport, from source: BluetoothAddress, at now: Timestamp) {
        routing.restoreSource(report, from: source, at: now)
    }

    /// A single bridge shuts down gracefully: every head-tracking session ends (nobody takes them over; a cluster's
    /// slot that stops is taken over with its sessions, and does not call this).
    public mutating func shutDown(at now: Timestamp) -> [BridgeAction] {
        let output = routing.shutDown(at: now)
        var actions = self.actions(of: output)
        publishStates(of: output.rerouted, except: nil, into: &actions)
        return actions
    }

    /// Every retained state is in: forgets what routing does not need.
    public mutating func restoringFinished() {
        routing.restoringFinished()
        agenda.scheduleRouting(at: routing.nextDeadline)
    }

    // MARK: - Helpers

    /// What the bridge publishes about `accessory`: with its routed source, and this machine's epoch.
    private func published(_ accessory: Accessory) -> AccessoryState {
        AccessoryState(
            accessory, routedSource: routing.routedSource(for: accessory.id), epoch: epoch,
            headTracking: routing.headTrackingSession(of: accessory.id))
    }

    /// Keeps `accessory`; in a cluster, says which playing devices the slot starts or stops reading. A device newly
    /// listed waits until the shell says whether another slot lists it too; one restored does not (the shell tells
    /// the slot its shared devices once it is rebuilt).
    private mutating func save(_ accessory: Accessory, into actions: inout [BridgeAction], restoring: Bool = false) {
        if listed != nil {
            let before = store[accessory.id].map { RoutingAccessory($0).connected } ?? []
            let (started, ended) = listed!.relist(from: before, to: RoutingAccessory(accessory).connected)
            if !restoring {
                for source in started { routing.deviceListed(source) }
            }
            for source in ended { routing.deviceUnlisted(source) }
            actions += started.map(BridgeAction.watchSource) + ended.map(BridgeAction.unwatchSource)
        }
        store.save(accessory)
    }

    private func machine(for id: AccessoryID) -> AccessoryStateMachine {
        store[id].map { AccessoryStateMachine(restoring: $0, policy: policy.accessory) }
            ?? AccessoryStateMachine(id: id, policy: policy.accessory)
    }

    /// A routing transition's output as actions: its deadline scheduled, its commands, claims and releases, then the
    /// states of the accessories whose route moved.
    private mutating func routed(_ output: RoutingOutput) -> [BridgeAction] {
        agenda.scheduleRouting(at: output.nextDeadline)
        var actions = self.actions(of: output)
        publishStates(of: output.rerouted, except: nil, into: &actions)
        return actions
    }

    /// Runs routing for a changed accessory; its commands go into `actions`. Returns the accessories whose route
    /// changed.
    private mutating func route(_ accessory: Accessory, at now: Timestamp, into actions: inout [BridgeAction])
        -> [AccessoryID]
    {
        let output = routing.accessoryChanged(RoutingAccessory(accessory), at: now)
        agenda.scheduleRouting(at: output.nextDeadline)
        actions += self.actions(of: output)
        return output.rerouted
    }

    /// What a routing output asks the shell to do, in order: the worn listings (before the claims), the
    /// commands, the claims, the releases (after the commands, which carry the released devices' epochs), then rule
    /// 13's session news (after the commands that moved the routes they follow).
    private func actions(of output: RoutingOutput) -> [BridgeAction] {
        var actions = output.commands.map(BridgeAction.sendCommand)
        if !output.worn.isEmpty || !output.claims.isEmpty || !output.releases.isEmpty {
            actions = output.worn.map(BridgeAction.noteWorn) + actions + output.claims.map(BridgeAction.claimDevice)
                + output.releases.map(BridgeAction.releaseDevice)
        }
        for event in output.headTracking {
            guard let hub = store[event.session.accessory]?.hub else { continue }
            actions.append(.headTracking(event, hub: hub))
        }
        return actions
    }

    private mutating func publishStates(
        of ids: [AccessoryID], except skipped: AccessoryID?, into actions: inout [BridgeAction]
    ) {
        for id in ids where id != skipped {
            if let state = state(of: id) { actions.append(.publishState(state)) }
        }
    }

    private mutating func scheduleDiagnostics(of machine: AccessoryStateMachine, before previous: Timestamp?) {
        guard let deadline = machine.nextDeadline, deadline != previous else { return }
        agenda.schedule(.accessory(machine.id), at: deadline)
    }
}

/// When hubs were last asked for a rebirth, per accessory, for the rate limit; entries older than the interval are
/// dropped as new ones come, so it holds only the accessories with a recent gap.
struct RecentRebirths: Sendable {
    private var asked: [AccessoryID: Timestamp] = [:]
    private var pruneAt = 64

    /// Whether a rebirth request about `id` may go out now (and if so, records it).
    mutating func allow(_ id: AccessoryID, at now: Timestamp, interval: Duration) -> Bool {
        if let last = asked[id], now < last + interval { return false }
        asked[id] = now
        if asked.count >= pruneAt {
            asked = asked.filter { now < $0.value + interval }
            pruneAt = max(64, asked.count * 2)
        }
        return true
    }

    mutating func forget(_ id: AccessoryID) {
        asked[id] = nil
    }
}
