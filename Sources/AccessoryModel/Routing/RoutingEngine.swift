/// Decides which playing device (source) plays on which accessory, and tells the devices.
///
/// A pure state machine over all accessories and sources: each transition takes an event and the time and returns
/// the ``SwitchCommand``s to publish, the accessories whose routed source changed, and the next deadline. It never
/// reads a clock and never performs I/O.
///
/// The rules, each tied to the ``SwitchCommand/Reason`` of the commands it issues:
/// 1. Only registered accessories with `.audioSwitching`, not stale, take part. One that stops taking part while
///    routed has its source released (``SwitchCommand/Reason/accessoryIneligible``).
/// 2. Worn means in ear, on head or over the ear; without `.placement`, an accessory is worn while it has a source.
/// 3. A source routes to at most one accessory, and an accessory is routed from at most one source.
/// 4. Put on: the accessory's best active candidate source (its primary or secondary; a call before media; then the
///    most recently active; between equally recent ones, the one whose device says it already has that route) is
///    routed to it; if rule 5 paused that source off this accessory within the resume window, it is also resumed
///    (``SwitchCommand/Reason/putOn``). A source paused by rule 5 counts as active with
///    the activity it had when paused, whatever it reported since, until the window closes.
/// 5. Taken off: the source routed to it is paused at once and remembered for rule 4
///    (``SwitchCommand/Reason/takenOff``).
/// 6. A source becomes active (idle to media or call, or media to call) while unrouted: it is routed to its most
///    recently worn candidate accessory, and the source it displaces is paused. Media never takes an accessory from
///    a call; a call takes it from media (and a newer call from an older one). A source that becomes a candidate of
///    a worn, unrouted accessory while active is routed the same way (``SwitchCommand/Reason/sourceActivated``).
/// 7. The routed source disappears from the accessory's identifiers: it is paused, and the other candidate, if
///    active and unrouted, is routed (``SwitchCommand/Reason/sourceDisconnected``).
/// 8. Unpaired, re-paired or invalidated while routed: the source is released
///    (``SwitchCommand/Reason/registrationEnded``).
/// 9. No command repeats what is in force: the engine tracks what each device has, from its own commands and from
///    the device's reported `routed_accessory_id`, and a ROUTE to the accessory a device already has, or a PAUSE or
///    RELEASE off an accessory the device is not routed to, is not sent.
/// 10. Every command has a unique id, a per-source increasing sequence and the reason of its rule.
/// 11. **An interruption ends**: when a call that displaced media (or an earlier call) on a worn accessory ends — its
///     source goes idle or disconnects — while the accessory is still worn and nothing newer claimed it, the call's
///     source is released and the displaced source routed back and resumed (``SwitchCommand/Reason/interruptionEnded``).
///     Nothing is resumed when the accessory was taken off meanwhile, another source was routed to it, the displaced
///     source disconnected, played something itself or was paused on the device, or more than the interruption
///     window passed.
/// 12. **The person's controls**: with automatic switching off, the engine lets go of the accessory without a command
///     and never routes, pauses or resumes for it; turned back on, the accessory is as if just put on (rule 4). A
///     pinned source is its only candidate: another one routed to it is paused, and the pinned one routed if active
///     (``SwitchCommand/Reason/controlsChanged``); unpinned, the other connected sources are candidates again.
///
/// Each rule is one function in "Rules" below, named after what happens (docs/routing.md maps them), and goes
/// through the primitives `route`, `unroute` and `issue` (rules 3, 9 and 10); ``RoutingTable`` stores the accessories
/// and sources and decides nothing.
///
/// A command the bridge could not send (``commandNotSent(_:)``) no longer counts as in force, and is owed: the next
/// ``reconcile(at:)`` (when the broker connection is back) sends it again if it still agrees with the routes.
///
/// In a cluster, a playing device that accessories of other slots list too is routed only while this slot holds it
/// (``DeviceClaim``, ``SharedDevices``): where a rule would route a shared device it does not hold, the engine asks for
/// it and runs the rule again when etcd answered; a device another slot holds counts as routed elsewhere.
///
/// The engine keeps only what routing needs: accessories that take part, and sources that some accessory lists or
/// that are active, routed (or, as far as it knows, have a route in force), paused within the resume window or owed
/// a command. Everything else leaves no trace.
public struct RoutingEngine: Sendable {
    /// Timings of the routing rules.
    public struct Policy: Hashable, Sendable {
        /// How long after rule 5 paused a source putting the accessory back on also resumes it (rule 4).
        public var resumeWindow: Duration = .seconds(15)
        /// How long after a call displaced a source its end still brings that source back (rule 11).
        public var interruptionWindow: Duration = .seconds(300)

        public init() {}
    }

    public let policy: Policy
    /// Prefix of every command id; distinct per engine instance so ids stay unique across restarts.
    public let instanceID: String
    /// Each source's first command has sequence `commandSequenceBase + 1`, and each of its later commands the next
    /// number. A source the engine forgot and meets again continues above every sequence issued so far, so sequences
    /// always increase per source. A bridge passes a base that grows with time (its start in milliseconds × 1000), so
    /// that they keep increasing across its restarts.
    public let commandSequenceBase: UInt64
    /// The ownership epoch every command carries (0 for a single bridge; see ``SwitchCommand/epoch``). Reports compare
    /// by ``CommandOrder``: a device that last applied an older owner's command has not applied this engine's.
    public let epoch: UInt64
    /// `policy.resumeWindow` in milliseconds, converted once (see ``Timestamp/advanced(byMilliseconds:)``).
    private let resumeWindow: Int64
    /// `policy.interruptionWindow` in milliseconds.
    private let interruptionWindow: Int64

    /// The accessories and sources, by slot: storage, no decisions.
    private var table = RoutingTable()
    /// How many sources are routed to an accessory: ``routes``'s count, without building it.
    public var routeCount: Int { table.routeCount }
    /// Rule 5 pauses in the order they expire (lazily pruned).
    private var expiries = ExpiryQueue()
    /// The highest command sequence issued, where a new source's count starts.
    private var highestCommandSequence: UInt64
    // What only a few sources have at a time lives beside their entries, not in each of them.
    /// Per source, the commands that could not be sent, in order, until ``reconcile(at:)``.
    private var owed: [BluetoothAddress: [SwitchCommand]] = [:]
    /// Rule 5's memory, for rule 4: the sources paused by a take-off, while their resume window is open.
    private var pausedByTakeOff: [BluetoothAddress: PausedPlayback] = [:]
    /// Rule 11's memory: per accessory, the sources calls displaced from it, oldest first. Only while calls last.
    private var interruptions: [AccessoryID: [Interruption]] = [:]
    /// Rule 9's memory: per source, the route its device has as far as the engine knows, from the engine's own
    /// commands and the device's reports. Only the sources that have one: routed ones, mostly.
    private var routesInForce = SparseTable<BluetoothAddress, AccessoryID>()
    /// While restoring: since when every device restored as active counts as active. A restart cannot tell which
    /// played last, so they are all as recent as each other (a tie in rule 4's "most recently active", which
    /// `bestCandidate` breaks).
    private var restoredActiveSince: Timestamp?
    /// In a cluster, the devices other slots list too: which this slot holds, which it waits for.
    private var sharing = SharedDevices()

    public init(policy: Policy = Policy(), instanceID: String, commandSequenceBase: UInt64 = 0, epoch: UInt64 = 0) {
        self.policy = policy
        self.instanceID = instanceID
        self.commandSequenceBase = commandSequenceBase
        self.epoch = epoch
        self.highestCommandSequence = commandSequenceBase
        self.resumeWindow = policy.resumeWindow.wholeMilliseconds
        self.interruptionWindow = policy.interruptionWindow.wholeMilliseconds
    }

    // MARK: - Queries

    /// The source routed to `accessory`, if any.
    public func routedSource(for accessory: AccessoryID) -> BluetoothAddress? {
        table.kept(accessory).flatMap { table.accessories[$0].routedSource }.map { table.sources[$0].address }
    }

    /// The last activity `source` reported (idle when it never did, or when the engine no longer keeps it).
    public func activity(of source: BluetoothAddress) -> Activity {
        table.kept(source).map { table.sources[$0].activity } ?? .idle
    }

    /// Every route, source to accessory.
    public var routes: [BluetoothAddress: AccessoryID] {
        var routes: [BluetoothAddress: AccessoryID] = [:]
        for source in table.sources {
            if let accessory = source.routedAccessory {
                routes[source.address] = table.accessories[accessory].view.id
            }
        }
        return routes
    }

    /// In a cluster, the shared devices this slot holds, with their epochs.
    public var heldDevices: [BluetoothAddress: UInt64] { sharing.held }

    /// How many sources the engine keeps (those some accessory lists), by their last reported activity.
    public var sourcesByActivity: [Activity: Int] { table.activityCounts.dictionary }

    /// ``sourcesByActivity`` counted by walking every source: the tests' oracle for the kept counts.
    var walkedSourcesByActivity: [Activity: Int] {
        var counts = CaseCounts<Activity>()
        for source in table.sources { counts.add(source.activity) }
        return counts.dictionary
    }

    /// How many accessories and sources the engine keeps: what the bounds on its state are about.
    public var footprint: (accessories: Int, sources: Int) { (table.accessories.count, table.sources.count) }

    /// When ``tick(at:)`` next has something to do (a rule 5 pause leaving the resume window), if ever.
    public var nextDeadline: Timestamp? { expiries.first?.expiresAt }

    // MARK: - Transitions

    /// An accessory's state changed (placement, sources, registration, staleness, the person's controls): the rules
    /// it concerns, in this order.
    public mutating func accessoryChanged(_ view: RoutingAccessory, at now: Timestamp) -> RoutingOutput {
        var output = RoutingOutput()
        guard view.automaticSwitching else {
            switchedOff(view.id, into: &output)
            tellWorn(view.id, into: &output)
            releaseUnrouted(into: &output)
            output.nextDeadline = nextDeadline
            return output
        }
        guard let (slot, previous) = keep(view) else {
            output.nextDeadline = nextDeadline
            return output
        }
        let listedBefore = previous?.sources ?? []
        if listedBefore != view.sources {
            updateListings(of: slot, from: listedBefore, to: view.sources)
        }
        let wasWorn = previous?.isWorn ?? false

        if let source = table.accessories[slot].routedSource {
            if !view.takesPart {
                if view.registration == .registered {
                    becameIneligible(slot, routedFrom: source, at: now, into: &output)
                } else {
                    registrationEnded(slot, routedFrom: source, at: now, into: &output)
                }
            } else if !view.sources.contains(table.sources[source].address) {
                routedSourceLeft(slot, source, at: now, into: &output)
            } else if !view.isWorn {
                takenOff(slot, routedFrom: source, at: now, into: &output)
            }
        }
        if view.isWorn && !wasWorn {
            table.accessories[slot].wornSince = now
            putOn(slot, at: now, into: &output)
        } else if view.isWorn && table.accessories[slot].routedSource == nil && listedBefore != view.sources {
            candidatesAdded(slot, previous: previous, at: now, into: &output)
        } else if !view.isWorn {
            table.accessories[slot].wornSince = nil
        }
        if !view.isWorn {
            // Taken off (or out of routing): what a call interrupted is not resumed (rules 5 and 11).
            interruptions[view.id] = nil
        }
        output.routedSource = table.accessories[slot].routedSource.map { table.sources[$0].address }
        forgetUnneeded(slot, listedBefore: listedBefore)
        tellWorn(view.id, into: &output)
        releaseUnrouted(into: &output)
        output.nextDeadline = nextDeadline
        return output
    }

    /// A playing device reported its state.
    public mutating func sourceReported(_ report: SourceReport, from address: BluetoothAddress, at now: Timestamp)
        -> RoutingOutput
    {
        var output = RoutingOutput(nextDeadline: nextDeadline)
        let source = sourceSlot(address)
        if report.sequence != 0 {
            // An old or repeated report changes nothing.
            guard report.sequence > table.sources[source].lastReportSequence else { return output }
            table.sources[source].lastReportSequence = report.sequence
        }
        let before = table.sources[source].activity
        if let activity = report.activity {
            table.setActivity(activity, of: source)
        }
        // A route the device reported before it applied the latest command would undo that command (rule 9).
        let stale = report.applied(before: table.sources[source].lastIssued, of: sharing.epoch(of: address, slotEpoch: epoch))
        let reportedRoute = stale ? nil : report.routedAccessory
        if let reported = reportedRoute {
            setInForce(source, reported)
        }
        let activity = table.sources[source].activity
        noteReportOfDisplaced(source, report, before: before)
        if before == .call, activity == .idle, let accessory = table.sources[source].routedAccessory,
            interruptions[table.accessories[accessory].view.id]?.last?.by == address
        {
            // Rule 11: the call ended where it had displaced something.
            unroute(source, from: accessory, with: .release, reason: .interruptionEnded, at: now, into: &output)
            endInterruption(on: accessory, by: address, at: now, into: &output)
        }
        let becameActive = activity.isActive && activity.priority > before.priority
        if becameActive {
            table.sources[source].activeSince = now
            // The device plays again on its own: a rule 5 pause is no longer waiting to be resumed.
            pausedByTakeOff[table.sources[source].address] = nil
        }

        if let reported = reportedRoute, let accessory = table.kept(reported),
            table.sources[source].routedAccessory != accessory
        {
            adoptReportedRoute(of: source, to: accessory, at: now, into: &output)
        }
        if becameActive, table.sources[source].routedAccessory == nil {
            activate(source, at: now, into: &output)
        }
        pruneSource(address)
        releaseUnrouted(into: &output)
        output.nextDeadline = nextDeadline
        return output
    }

    /// A command this engine issued could not be sent (the bridge is disconnected, beyond its queue's bound). The
    /// device still has what it had: the command no longer counts as in force (rule 9), and it is owed until
    /// ``reconcile(at:)``. Report commands in the order they were issued.
    public mutating func commandNotSent(_ command: SwitchCommand) {
        guard let source = table.kept(command.source) else { return }
        // What the device has is unknown now, which rule 9 treats as "nothing": the next ROUTE is sent, and no PAUSE
        // or RELEASE off an accessory the device may not have.
        setInForce(source, nil)
        owed[command.source, default: []].append(command)
    }

    /// Sends again the owed commands that still agree with the routes (a ROUTE or RESUME to the accessory the source
    /// is still routed to; a PAUSE or RELEASE off one it no longer is), as new commands with their original reasons.
    /// The bridge calls it when its broker connection is back.
    public mutating func reconcile(at now: Timestamp) -> RoutingOutput {
        var output = RoutingOutput()
        let owedNow = owed
        owed = [:]
        for (address, commands) in owedNow.sorted(by: { $0.key < $1.key }) {
            guard let source = table.kept(address) else { continue }
            for command in commands {
                let routed = table.sources[source].routedAccessory.map { table.accessories[$0].view.id }
                let stillTrue =
                    switch command.action {
                    case .routeToAccessory, .resume: routed == command.accessoryID
                    case .pause, .release: routed != command.accessoryID
                    }
                guard stillTrue else { continue }
                let inForceNow: AccessoryID? =
                    switch command.action {
                    case .routeToAccessory, .resume: command.accessoryID
                    case .pause, .release: nil
                    }
                setInForce(source, inForceNow)
                issue(command.action, to: source, accessory: command.accessoryID, reason: command.reason, at: now,
                    into: &output)
            }
        }
        for address in Set(output.commands.map(\.source)) { pruneSource(address) }
        output.nextDeadline = nextDeadline
        return output
    }

    // MARK: - Shared devices (a cluster)

    /// What etcd said about a shared device (each case below); then a device held and no longer routed is let go.
    public mutating func sharedDevice(_ event: SharedDeviceEvent, at now: Timestamp) -> RoutingOutput {
        var output = RoutingOutput()
        switch event {
        case .shared(let source, let isShared), .listed(let source, let isShared):
            deviceShared(source, isShared, at: now, into: &output)
        case .claimed(let source, let epoch): deviceClaimed(source, epoch: epoch, at: now, into: &output)
        case .claimRefused(let source, let holderEpoch):
            deviceClaimRefused(source, holderEpoch: holderEpoch, at: now, into: &output)
        case .claimWithdrawn(let source): sharing.pending[source] = nil
        case .heldElsewhere(let source, let epoch): deviceHeldElsewhere(source, epoch: epoch, into: &output)
        case .releasedElsewhere(let source): sharing.forgetHolderElsewhere(source)
        }
        releaseUnrouted(into: &output)
        output.nextDeadline = nextDeadline
        return output
    }

    /// An accessory of this slot lists `source` now, and none did: until the shell confirms whether another slot
    /// lists it too (``deviceShared(_:_:at:)``), it waits like a shared device. Nothing is sent.
    public mutating func deviceListed(_ source: BluetoothAddress) {
        sharing.unconfirmed.insert(source)
    }

    /// No accessory of this slot lists `source` any more. A device it held is let go after this change's commands.
    public mutating func deviceUnlisted(_ source: BluetoothAddress) {
        sharing.unconfirmed.remove(source)
        sharing.shared.remove(source)
        sharing.pending[source] = nil
        sharing.forgetHolderElsewhere(source)
    }

    /// Whether accessories of another slot list `source` too (etcd's lister keys; docs/scale-out.md). Shared, a device
    /// this slot routes is claimed for the route it has, and the worn accessories listing it have their put-ons
    /// ordered; no longer shared, what waited for it runs, and a device held is let go.
    private mutating func deviceShared(
        _ source: BluetoothAddress, _ isShared: Bool, at now: Timestamp, into output: inout RoutingOutput
    ) {
        let wasShared = sharing.shared.contains(source)
        sharing.unconfirmed.remove(source)
        if isShared {
            sharing.shared.insert(source)
        } else {
            sharing.shared.remove(source)
            sharing.forgetHolderElsewhere(source)
        }
        // Kept or not (an accessory that does not take part may list it), the device's sharing is known from here.
        if let slot = table.kept(source) {
            if wasShared != isShared {
                for accessory in table.listings(of: slot) { tellWorn(table.accessories[accessory].view.id, into: &output) }
            }
            if !isShared {
                if let pending = sharing.pending.removeValue(forKey: source) {
                    decideAgain(pending, for: slot, at: now, into: &output)
                }
            } else if var pending = sharing.pending[source], !pending.claimed {
                pending.claimed = true
                sharing.pending[source] = pending
                output.claims.append(DeviceClaim(source: source, accessory: pending.accessory, kind: pending.rule.claim))
            } else if sharing.pending[source] == nil, sharing.held[source] == nil,
                let accessory = table.sources[slot].routedAccessory
            {
                let id = table.accessories[accessory].view.id
                sharing.pending[source] = .init(accessory: id, rule: .keep, claimed: true)
                output.claims.append(DeviceClaim(source: source, accessory: id, kind: .ifFree))
            }
        }
    }

    /// This slot holds `source` now, at `epoch` (the holder key's revision): the decision that waited for it runs
    /// again, and its commands carry that epoch.
    private mutating func deviceClaimed(
        _ source: BluetoothAddress, epoch revision: UInt64, at now: Timestamp, into output: inout RoutingOutput
    ) {
        sharing.holdHere(source, at: revision)
        if let pending = sharing.pending.removeValue(forKey: source), let slot = table.kept(source) {
            decideAgain(pending, for: slot, at: now, into: &output)
        }
    }

    /// Another slot holds `source` (at `holderEpoch`), and this slot may not take it: nothing is sent for it. A route
    /// the slot had is let go without a command (the holder's commands move the device); an accessory that waited for
    /// it gets its best other free candidate.
    private mutating func deviceClaimRefused(
        _ source: BluetoothAddress, holderEpoch: UInt64, at now: Timestamp, into output: inout RoutingOutput
    ) {
        sharing.holdElsewhere(source, at: holderEpoch)
        if let slot = table.kept(source) {
            dropRoute(of: slot, into: &output)
            let pending = sharing.pending.removeValue(forKey: source)
            if case .interruption(let caller)? = pending?.rule, let accessory = table.kept(pending!.accessory) {
                // Another slot has it: what else the calls displaced may come back.
                endInterruption(on: accessory, by: caller, at: now, into: &output)
            } else if let pending, pending.rule == .putOn || pending.rule.isCandidate,
                let accessory = table.kept(pending.accessory),
                table.accessories[accessory].view.isWorn, table.accessories[accessory].routedSource == nil,
                let other = bestCandidate(of: accessory, at: now, where: isFree),
                mayRoute(other, to: accessory, for: .candidate(.sourceActivated), into: &output)
            {
                route(other, to: accessory, reason: .sourceActivated, at: now, into: &output)
            }
        } else {
            sharing.pending[source] = nil
        }
    }

    /// Another slot took `source` (etcd's watch: its holder key names another slot now, at `epoch`). As in one
    /// bridge, where another accessory's put-on takes the device: this slot's accessory loses it, and nothing is
    /// sent (the new holder's commands move the device).
    private mutating func deviceHeldElsewhere(
        _ source: BluetoothAddress, epoch revision: UInt64, into output: inout RoutingOutput
    ) {
        sharing.holdElsewhere(source, at: revision)
        if let slot = table.kept(source) { dropRoute(of: slot, into: &output) }
    }

    // MARK: - Restoring

    /// Takes an accessory back as it was published before a restart — with the route it had — without running any
    /// rule: nothing is sent. The route is kept only when it is still possible (worn, listed, source free).
    public mutating func restore(_ view: RoutingAccessory, routedSource: BluetoothAddress?, at now: Timestamp) {
        if let known = table.kept(view.id), let previous = table.accessories[known].routedSource {
            // A second retained state of the same accessory (delivered again, or written meanwhile by another bridge)
            // replaces the first: the route comes from it alone. Left in place, a route the new state no longer names
            // would outlive the accessory's slot.
            table.setRoute(of: previous, to: nil)
            table.accessories[known].routedSource = nil
        }
        let slot: Int
        if !view.takesPart {
            // Rule 1: none of routing's business (any route an earlier retained state of it gave was dropped above).
            return
        } else if let known = table.kept(view.id) {
            slot = known
            updateListings(of: slot, from: table.accessories[slot].view.sources, to: view.sources)
            table.accessories[slot].view = view
        } else {
            slot = table.addAccessory(view)
            updateListings(of: slot, from: [], to: view.sources)
        }
        table.accessories[slot].wornSince = view.isWorn ? now : nil
        guard let address = routedSource, view.isWorn, view.sources.contains(address) else { return }
        let source = sourceSlot(address)
        let routedTo = table.sources[source].routedAccessory
        guard routedTo == nil || routedTo == slot else { return }
        table.setRoute(of: source, to: slot)
        // The bridge sent the route before it stopped: the device has it, unless it says otherwise.
        if !table.sources[source].reportedRoute {
            setInForce(source, view.id)
        }
        table.accessories[slot].routedSource = source
    }

    /// Takes a playing device's retained state back after a restart, without running any rule: nothing is sent. What
    /// a device says it is routed to wins over what the bridge remembers sending, in whichever order the two arrive.
    /// Call ``restoringFinished()`` once every state is in.
    public mutating func restoreSource(_ report: SourceReport, from address: BluetoothAddress, at now: Timestamp) {
        let source = sourceSlot(address)
        table.sources[source].lastReportSequence = max(table.sources[source].lastReportSequence, report.sequence)
        if let activity = report.activity {
            table.setActivity(activity, of: source)
            if activity.isActive {
                let since = restoredActiveSince ?? now
                restoredActiveSince = since
                table.sources[source].activeSince = since
            }
        }
        if let routed = report.routedAccessory {
            setInForce(source, routed)
            table.sources[source].reportedRoute = true
        }
    }

    /// Ends restoring: forgets the sources routing does not need (see ``restoreSource(_:from:at:)``, which keeps
    /// every source until now so that the order in which states arrive does not matter).
    public mutating func restoringFinished() {
        restoredActiveSince = nil
        for index in table.sources.indices {
            table.sources[index].reportedRoute = false
        }
        for address in table.sources.map(\.address) {
            pruneSource(address)
        }
    }

    /// Lets time pass: forgets rule 5 pauses whose resume window closed. Issues no commands.
    public mutating func tick(at now: Timestamp) -> RoutingOutput {
        while let next = expiries.first, next.expiresAt <= now {
            expiries.removeFirst()
            if let paused = pausedByTakeOff[next.source], paused.at.advanced(byMilliseconds: resumeWindow) <= now {
                pausedByTakeOff[next.source] = nil
                pruneSource(next.source)
            }
        }
        return RoutingOutput(nextDeadline: nextDeadline)
    }

    // MARK: - Rules
    //
    // One function per rule of docs/routing.md (and of the list above), named after what happens, in the rules'
    // order; the primitives below hold rules 3, 9 and 10, which every other rule goes through.

    /// Rule 1: a new accessory is kept only when it takes part (registered, with `.audioSwitching`, not stale):
    /// its slot and its view before this change, or `nil` for an accessory that is none of routing's business.
    private mutating func keep(_ view: RoutingAccessory) -> (slot: Int, previous: RoutingAccessory?)? {
        if let known = table.kept(view.id) {
            let previous = table.accessories[known].view
            table.accessories[known].view = view
            return (known, previous)
        }
        guard view.takesPart else { return nil }
        return (table.addAccessory(view), nil)
    }

    /// Rule 1: a routed accessory that stops taking part while still registered (it lost `.audioSwitching`, or went
    /// stale) has its source released.
    private mutating func becameIneligible(
        _ accessory: Int, routedFrom source: Int, at now: Timestamp, into output: inout RoutingOutput
    ) {
        unroute(source, from: accessory, with: .release, reason: .accessoryIneligible, at: now, into: &output)
    }

    /// Rule 4: route the worn accessory's best active candidate, resuming it when rule 5 paused it here.
    private mutating func putOn(_ accessory: Int, at now: Timestamp, into output: inout RoutingOutput) {
        guard let source = bestCandidate(of: accessory, at: now, countingPauses: true, where: { _ in true }),
            mayRoute(source, to: accessory, for: .putOn, into: &output)
        else { return }
        let resume = resumable(source, on: accessory, at: now)
        route(source, to: accessory, reason: .putOn, at: now, into: &output)
        if resume {
            pausedByTakeOff[table.sources[source].address] = nil
            issue(.resume, to: source, accessory: table.accessories[accessory].view.id, reason: .putOn, at: now,
                into: &output)
        }
    }

    /// Rule 5: taken off: the source routed to it is paused at once, and remembered for rule 4.
    private mutating func takenOff(
        _ accessory: Int, routedFrom source: Int, at now: Timestamp, into output: inout RoutingOutput
    ) {
        if unroute(source, from: accessory, with: .pause, reason: .takenOff, at: now, into: &output) {
            rememberPause(of: source, off: accessory, at: now)
        }
    }

    /// Rule 5's memory, for rule 4: what was paused off which accessory, until the resume window closes.
    private mutating func rememberPause(of source: Int, off accessory: Int, at now: Timestamp) {
        pausedByTakeOff[table.sources[source].address] = PausedPlayback(
            accessory: table.accessories[accessory].view.id, at: now, activity: table.sources[source].activity)
        expiries.append(source: table.sources[source].address, expiresAt: now.advanced(byMilliseconds: resumeWindow))
    }

    /// Rule 6: an unrouted source became active; route it to its most recently worn candidate accessory.
    private mutating func activate(_ source: Int, at now: Timestamp, into output: inout RoutingOutput) {
        // Another slot's accessory has it: routed elsewhere.
        guard !sharing.isHeldElsewhere(table.sources[source].address) else { return }
        // The most recently worn; between equals, the smallest id, so the choice is deterministic.
        var target: Int?
        for candidate in table.listings(of: source) where table.accessories[candidate].view.isWorn {
            guard let current = target else {
                target = candidate
                continue
            }
            let (a, b) = (table.accessories[candidate], table.accessories[current])
            if (a.wornSince ?? .zero, b.view.id) > (b.wornSince ?? .zero, a.view.id) {
                target = candidate
            }
        }
        guard let target else { return }
        if let displaced = table.accessories[target].routedSource {
            // Media never takes an accessory from a call.
            guard table.sources[source].activity == .call || table.sources[displaced].activity != .call else { return }
        }
        guard mayRoute(source, to: target, for: .activated, into: &output) else { return }
        if let displaced = table.accessories[target].routedSource {
            let activity = table.sources[displaced].activity
            if unroute(displaced, from: target, with: .pause, reason: .sourceActivated, at: now, into: &output),
                table.sources[source].activity == .call, activity.isActive
            {
                // Rule 11: remember what the call interrupted, and the PAUSE that stopped it.
                interruptions[table.accessories[target].view.id, default: []].append(
                    Interruption(
                        displaced: table.sources[displaced].address, activity: activity,
                        by: table.sources[source].address, pausedWith: table.sources[displaced].lastIssued, at: now))
            }
        }
        route(source, to: target, reason: .sourceActivated, at: now, into: &output)
    }

    /// Rule 6 for a worn, unrouted accessory whose candidates changed: an active source newly connected to it is
    /// routed (or, rule 12, one newly allowed by the person's pin).
    private mutating func candidatesAdded(
        _ accessory: Int, previous: RoutingAccessory?, at now: Timestamp, into output: inout RoutingOutput
    ) {
        let listedBefore = previous?.sources ?? []
        let added = bestCandidate(of: accessory, at: now) {
            !listedBefore.contains(table.sources[$0].address) && isFree($0)
        }
        guard let added else { return }
        let reason: SwitchCommand.Reason =
            previous?.connected == table.accessories[accessory].view.connected ? .controlsChanged : .sourceActivated
        guard mayRoute(added, to: accessory, for: .candidate(reason), into: &output) else { return }
        route(added, to: accessory, reason: reason, at: now, into: &output)
    }

    /// Rule 7: the routed source disappeared from the accessory's identifiers (or, rule 12, is still connected but
    /// another source is pinned): it is paused; then, unless what a call of it interrupted comes back (rule 11),
    /// the best other candidate that is active and unrouted is routed.
    private mutating func routedSourceLeft(
        _ accessory: Int, _ source: Int, at now: Timestamp, into output: inout RoutingOutput
    ) {
        let view = table.accessories[accessory].view
        let address = table.sources[source].address
        let reason: SwitchCommand.Reason = view.connected.contains(address) ? .controlsChanged : .sourceDisconnected
        unroute(source, from: accessory, with: .pause, reason: reason, at: now, into: &output)
        if view.isWorn, !endInterruption(on: accessory, by: address, at: now, into: &output),
            let other = bestCandidate(of: accessory, at: now, where: isFree),
            mayRoute(other, to: accessory, for: .candidate(reason), into: &output)
        {
            route(other, to: accessory, reason: reason, at: now, into: &output)
        }
    }

    /// Rule 8: unpaired, re-paired or invalidated while routed: the source is released.
    private mutating func registrationEnded(
        _ accessory: Int, routedFrom source: Int, at now: Timestamp, into output: inout RoutingOutput
    ) {
        unroute(source, from: accessory, with: .release, reason: .registrationEnded, at: now, into: &output)
    }

    /// A device says it is routed to `accessory`: take that route over when it is possible (the accessory is worn,
    /// lists the source and is free), so that later rules act on it; nothing is sent. When another source holds the
    /// accessory, the device is paused off it (rule 3: one source per accessory), and the holder keeps it: a bridge
    /// killed after it routed this device, before the accessory's state was published, leaves its successor to
    /// decide that change again without knowing of that route, and the successor's choice stands.
    private mutating func adoptReportedRoute(
        of source: Int, to accessory: Int, at now: Timestamp, into output: inout RoutingOutput
    ) {
        let entry = table.accessories[accessory]
        let address = table.sources[source].address
        guard entry.view.isWorn, entry.view.sources.contains(address) else { return }
        // A shared device is this slot's only while it holds it: another slot's route is not taken over unasked.
        guard !sharing.needsClaim(address), !sharing.isHeldElsewhere(address) else { return }
        guard entry.routedSource == nil else {
            // The report made the route in force (rule 9); the PAUSE ends it.
            setInForce(source, nil)
            issue(.pause, to: source, accessory: entry.view.id, reason: .sourceActivated, at: now, into: &output)
            return
        }
        if let previous = table.sources[source].routedAccessory {
            table.accessories[previous].routedSource = nil
            output.noteRerouted(table.accessories[previous].view.id)
        }
        table.setRoute(of: source, to: accessory)
        table.accessories[accessory].routedSource = source
        output.noteRerouted(entry.view.id)
    }

    /// Rule 11: the call by `caller` on `accessory` ended (its source went idle, and was released, or disconnected).
    /// Routes back and resumes the latest source the calls displaced that can still come back, when the accessory
    /// is worn and free; earlier interruptions stay behind it. Returns whether it did.
    @discardableResult
    private mutating func endInterruption(
        on accessory: Int, by caller: BluetoothAddress, at now: Timestamp, into output: inout RoutingOutput
    ) -> Bool {
        let id = table.accessories[accessory].view.id
        guard var stack = interruptions[id], stack.last?.by == caller else { return false }
        interruptions[id] = nil
        let worn = table.accessories[accessory]
        guard worn.view.isWorn, worn.routedSource == nil else { return false }
        while let entry = stack.popLast() {
            guard let source = table.kept(entry.displaced), canResume(entry, source, on: accessory, at: now) else {
                continue
            }
            if sharing.needsClaim(entry.displaced) {
                // A shared device comes back once this slot holds it again: the answer runs this again.
                interruptions[id] = stack + [entry]
                _ = mayRoute(source, to: accessory, for: .interruption(by: caller), into: &output)
                return true
            }
            if !stack.isEmpty { interruptions[id] = stack }
            route(source, to: accessory, reason: .interruptionEnded, at: now, into: &output)
            issue(.resume, to: source, accessory: id, reason: .interruptionEnded, at: now, into: &output)
            return true
        }
        return false
    }

    /// Whether what a call displaced can come back now (rule 11).
    private func canResume(_ entry: Interruption, _ source: Int, on accessory: Int, at now: Timestamp) -> Bool {
        entry.resumable && now <= entry.at.advanced(byMilliseconds: interruptionWindow)
            && table.accessories[accessory].view.sources.contains(entry.displaced)
            && table.sources[source].routedAccessory == nil
            // A shared device another slot took is routed elsewhere.
            && !sharing.isHeldElsewhere(entry.displaced)
            && (entry.activity != .call || table.sources[source].activity == .call)
    }

    /// Rule 11: what a displaced source's report says about resuming it. Media that plays again by itself, or that
    /// went idle before the bridge's PAUSE reached it (the person paused it), and a call that ended, do not come back.
    private mutating func noteReportOfDisplaced(
        _ source: Int, _ report: SourceReport, before: Activity
    ) {
        // Most of the time no call interrupted anything.
        guard !interruptions.isEmpty else { return }
        let address = table.sources[source].address
        for accessory in table.listings(of: source) {
            let id = table.accessories[accessory].view.id
            guard let stack = interruptions[id], stack.contains(where: { $0.displaced == address }) else { continue }
            interruptions[id] = stack.map { entry in
                guard entry.displaced == address else { return entry }
                var entry = entry
                let activity = table.sources[source].activity
                switch entry.activity {
                case .call:
                    if activity == .idle { entry.resumable = false }
                default:
                    // Playing again after it stopped, or something else (a call of its own).
                    let playsItself = activity.isActive && (!before.isActive || activity != entry.activity)
                    let pausedOnDevice =
                        activity == .idle
                        && report.applied(before: entry.pausedWith, of: sharing.epoch(of: address, slotEpoch: epoch))
                    if playsItself || pausedOnDevice { entry.resumable = false }
                }
                return entry
            }
        }
    }

    /// Rule 12: the person switched automatic switching off: the engine lets go of the accessory without a command
    /// (what plays on it goes on playing) and does nothing for it until it is back on. Its route, if any, stays in
    /// force on the device (rule 9 keeps knowing it), but the engine no longer counts it as its own.
    private mutating func switchedOff(_ id: AccessoryID, into output: inout RoutingOutput) {
        guard let slot = table.kept(id) else { return }
        if let source = table.accessories[slot].routedSource {
            table.setRoute(of: source, to: nil)
            table.accessories[slot].routedSource = nil
            output.noteRerouted(id)
        }
        let listed = table.accessories[slot].view.sources
        removeAccessory(at: slot)
        for address in listed { pruneSource(address) }
    }

    // MARK: - Primitives

    /// Whether `source` is free for another accessory of this slot: unrouted here, and not held by another slot.
    private func isFree(_ source: Int) -> Bool {
        table.sources[source].routedAccessory == nil && !sharing.isHeldElsewhere(table.sources[source].address)
    }

    /// Whether `source` may be routed to `accessory` now. A shared device this slot does not hold may not: the
    /// decision waits (the latest one per device), and the device is claimed for it unless a claim is on its way
    /// that asks as much (a put-on's takes over, and so covers any other).
    private mutating func mayRoute(
        _ source: Int, to accessory: Int, for rule: SharedDevices.Rule, into output: inout RoutingOutput
    ) -> Bool {
        let address = table.sources[source].address
        guard sharing.needsClaim(address) else { return true }
        let id = table.accessories[accessory].view.id
        let waiting = sharing.pending[address]
        var pending = SharedDevices.Pending(accessory: id, rule: rule, claimed: waiting?.claimed ?? false)
        let asksMore = rule == .putOn && waiting?.rule != .putOn
        if !sharing.unconfirmed.contains(address), !pending.claimed || asksMore {
            pending.claimed = true
            output.claims.append(DeviceClaim(source: address, accessory: id, kind: rule.claim))
        }
        sharing.pending[address] = pending
        return false
    }

    /// Runs again a decision that waited for `source` (now held, or no longer shared), when what it was about still
    /// holds.
    private mutating func decideAgain(
        _ pending: SharedDevices.Pending, for source: Int, at now: Timestamp, into output: inout RoutingOutput
    ) {
        switch pending.rule {
        case .keep:
            return
        case .interruption(let caller):
            if let accessory = table.kept(pending.accessory) {
                endInterruption(on: accessory, by: caller, at: now, into: &output)
            }
        case .activated:
            if table.sources[source].activity.isActive, table.sources[source].routedAccessory == nil {
                activate(source, at: now, into: &output)
            }
        case .putOn, .candidate:
            guard let accessory = table.kept(pending.accessory), table.accessories[accessory].view.isWorn,
                table.accessories[accessory].routedSource == nil
            else { return }
            if case .candidate(let reason) = pending.rule {
                guard table.sources[source].activity.isActive, isFree(source),
                    table.accessories[accessory].view.sources.contains(table.sources[source].address)
                else { return }
                route(source, to: accessory, reason: reason, at: now, into: &output)
            } else {
                putOn(accessory, at: now, into: &output)
            }
        }
    }

    /// Tells the shell which shared devices accessory `id` lists while worn, as it changed (``WornListing``).
    private mutating func tellWorn(_ id: AccessoryID, into output: inout RoutingOutput) {
        // A single bridge, and a slot sharing nothing: no look-up per change.
        guard !sharing.shared.isEmpty || !sharing.worn.isEmpty else { return }
        var now = Set<BluetoothAddress>()
        if let slot = table.kept(id), table.accessories[slot].view.isWorn {
            now = Set(table.accessories[slot].view.sources.filter(sharing.shared.contains))
        }
        let before = sharing.worn[id] ?? []
        guard now != before else { return }
        sharing.worn[id] = now.isEmpty ? nil : now
        for source in before.subtracting(now).sorted() {
            output.worn.append(WornListing(accessory: id, source: source, isWorn: false))
        }
        for source in now.subtracting(before).sorted() {
            output.worn.append(WornListing(accessory: id, source: source, isWorn: true))
        }
    }

    /// Lets go of `source`'s route here without a command: another slot's commands move the device.
    private mutating func dropRoute(of source: Int, into output: inout RoutingOutput) {
        guard let accessory = table.sources[source].routedAccessory else { return }
        table.accessories[accessory].routedSource = nil
        table.setRoute(of: source, to: nil)
        setInForce(source, nil)
        output.noteRerouted(table.accessories[accessory].view.id)
    }

    /// Lets go of the shared devices this slot holds but no longer routes, or that are no longer shared, after the
    /// output's commands (which carry their epoch).
    private mutating func releaseUnrouted(into output: inout RoutingOutput) {
        guard !sharing.held.isEmpty else { return }
        for (address, revision) in sharing.held.sorted(by: { $0.key < $1.key }) where sharing.pending[address] == nil {
            let routedHere = table.kept(address).flatMap { table.sources[$0].routedAccessory } != nil
            guard !routedHere || !sharing.shared.contains(address) else { continue }
            sharing.held[address] = nil
            sharing.raiseFloor(of: address, to: revision)
            output.releases.append(DeviceRelease(source: address, epoch: revision))
        }
    }

    /// The best active candidate of `accessory` that passes `filter`: a call before media, then the most recently
    /// active. With `countingPauses` (rule 4 only), a source paused by rule 5 off this accessory within the window
    /// counts with its activity at the pause; the other rules route what plays, never what waits to be resumed.
    private func bestCandidate(
        of accessory: Int, at now: Timestamp, countingPauses: Bool = false, where filter: (Int) -> Bool
    ) -> Int? {
        var best: (source: Int, priority: Int, since: Timestamp, routedHere: Int)?
        let id = table.accessories[accessory].view.id
        // Every listed source has a slot: updateListings gave it one.
        for address in table.accessories[accessory].view.sources {
            guard let source = table.kept(address), filter(source) else { continue }
            var activity = table.sources[source].activity
            if countingPauses, resumable(source, on: accessory, at: now), let paused = pausedByTakeOff[address],
                paused.activity.priority > activity.priority
            {
                activity = paused.activity
            }
            guard activity.isActive else { continue }
            let since = table.sources[source].activeSince
            // Between candidates as recently active as each other (after a restart, every active one), the device
            // that says it is routed here wins: it needs no command, and it is what the last decision chose.
            let routedHere = inForce(source) == id ? 1 : 0
            if let current = best,
                (current.priority, current.since, current.routedHere) >= (activity.priority, since, routedHere)
            {
                continue
            }
            best = (source, activity.priority, since, routedHere)
        }
        return best?.source
    }

    /// Whether rule 5 paused `source` off `accessory` within the resume window.
    private func resumable(_ source: Int, on accessory: Int, at now: Timestamp) -> Bool {
        guard let paused = pausedByTakeOff[table.sources[source].address] else { return false }
        return paused.accessory == table.accessories[accessory].view.id
            && now <= paused.at.advanced(byMilliseconds: resumeWindow)
    }

    /// Routes `source` to `accessory`, detaching the source from any other accessory (rule 3), and sends ROUTE unless
    /// the device already has that route (rule 9). The accessory must be free or already routed from `source`.
    private mutating func route(
        _ source: Int, to accessory: Int, reason: SwitchCommand.Reason, at now: Timestamp,
        into output: inout RoutingOutput
    ) {
        if let previous = table.sources[source].routedAccessory, previous != accessory {
            table.accessories[previous].routedSource = nil
            output.noteRerouted(table.accessories[previous].view.id)
        }
        let id = table.accessories[accessory].view.id
        if reason != .interruptionEnded, let last = interruptions[id]?.last, last.by != table.sources[source].address {
            // Another source claimed the accessory: nothing is resumed when the call ends (rule 11).
            interruptions[id] = nil
        }
        table.setRoute(of: source, to: accessory)
        table.accessories[accessory].routedSource = source
        output.noteRerouted(id)
        if inForce(source) != id {
            setInForce(source, id)
            issue(.routeToAccessory, to: source, accessory: id, reason: reason, at: now, into: &output)
        }
    }

    /// Ends the route of `source` to `accessory` with PAUSE or RELEASE, which is sent only when the device is routed
    /// there (rule 9). Returns whether it was sent.
    @discardableResult
    private mutating func unroute(
        _ source: Int, from accessory: Int, with action: SwitchCommand.Action, reason: SwitchCommand.Reason,
        at now: Timestamp, into output: inout RoutingOutput
    ) -> Bool {
        let id = table.accessories[accessory].view.id
        table.accessories[accessory].routedSource = nil
        table.setRoute(of: source, to: nil)
        output.noteRerouted(id)
        guard inForce(source) == id else { return false }
        setInForce(source, nil)
        issue(action, to: source, accessory: id, reason: reason, at: now, into: &output)
        return true
    }

    private mutating func issue(
        _ action: SwitchCommand.Action, to source: Int, accessory: AccessoryID, reason: SwitchCommand.Reason,
        at now: Timestamp, into output: inout RoutingOutput
    ) {
        table.sources[source].commandSequence += 1
        let sequence = table.sources[source].commandSequence
        table.sources[source].hasIssued = true
        highestCommandSequence = max(highestCommandSequence, sequence)
        let address = table.sources[source].address
        // A new decision supersedes what was owed: it was made knowing those commands did not go out.
        owed[address] = nil
        output.commands.append(
            SwitchCommand(
                id: "\(instanceID)-\(address.topicID)-\(sequence)", sequence: sequence, source: address,
                accessoryID: accessory, action: action, reason: reason, issuedAt: now,
                epoch: sharing.epoch(of: address, slotEpoch: epoch)))
    }

    /// The route the device of `source` has, as far as the engine knows (rule 9).
    private func inForce(_ source: Int) -> AccessoryID? {
        routesInForce[table.sources[source].address]
    }

    private mutating func setInForce(_ source: Int, _ accessory: AccessoryID?) {
        routesInForce[table.sources[source].address] = accessory
    }

    // MARK: - What the table keeps
    //
    // The table stores; what routing still needs, and so what it keeps, is decided here.

    /// The slot of `address`, created on first sight (its commands counting on above every sequence issued).
    private mutating func sourceSlot(_ address: BluetoothAddress) -> Int {
        table.sourceSlot(address, commandSequence: highestCommandSequence)
    }

    private mutating func updateListings(of accessory: Int, from old: SourcePair, to new: SourcePair) {
        table.updateListings(of: accessory, from: old, to: new, commandSequence: highestCommandSequence)
    }

    /// After an accessory changed: forgets it when it no longer takes part (its route was released), and the sources
    /// it listed that routing no longer needs.
    private mutating func forgetUnneeded(_ accessory: Int, listedBefore: SourcePair) {
        let view = table.accessories[accessory].view
        if !view.takesPart {
            removeAccessory(at: accessory)
            for address in view.sources { pruneSource(address) }
        }
        for address in listedBefore where !view.sources.contains(address) {
            pruneSource(address)
        }
    }

    /// Forgets an accessory (it takes no part and has no route), and what a call interrupted on it.
    private mutating func removeAccessory(at slot: Int) {
        interruptions[table.accessories[slot].view.id] = nil
        table.removeAccessory(at: slot, commandSequence: highestCommandSequence)
    }

    /// Forgets a source that routing no longer needs: no accessory lists it, it is idle, unrouted, has no route in
    /// force as far as the engine knows (rule 9 needs that), is not paused within the resume window and is owed
    /// nothing. What it reported last is lost with it; its retained state comes back after a restart, and a device
    /// reports again when it plays.
    private mutating func pruneSource(_ address: BluetoothAddress) {
        guard let slot = table.kept(address) else { return }
        let entry = table.sources[slot]
        guard entry.listedBy.isEmpty, entry.routedAccessory == nil, !entry.activity.isActive, routesInForce[address] == nil,
            pausedByTakeOff[address] == nil, owed[address] == nil
        else { return }
        table.removeSource(at: slot)
    }
}

extension RoutingEngine {
    /// A source a call displaced from an accessory (rule 11).
    struct Interruption: Sendable {
        var displaced: BluetoothAddress
        /// What the displaced source was doing.
        var activity: Activity
        /// The source of the call.
        var by: BluetoothAddress
        /// The sequence of the PAUSE that stopped the displaced source.
        var pausedWith: UInt64
        var at: Timestamp
        /// Whether it may still come back (its reports can rule that out).
        var resumable = true
    }

    struct PausedPlayback: Sendable {
        /// The accessory it was taken off.
        var accessory: AccessoryID
        var at: Timestamp
        var activity: Activity
    }
}

extension SourceReport {
    /// Whether the device says it had not yet applied this engine's command `sequence` (of `epoch`) when it reported:
    /// the last command it applied comes before it (0: no such command, never).
    fileprivate func applied(before sequence: UInt64, of epoch: UInt64) -> Bool {
        guard sequence != 0, let last = lastCommand else { return false }
        return last < CommandOrder(epoch: epoch, sequence: sequence)
    }
}
