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
///    most recently active) is routed to it; if rule 5 paused that source off this accessory within the resume
///    window, it is also resumed (``SwitchCommand/Reason/putOn``). A source paused by rule 5 counts as active with
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
/// A command the bridge could not send (``commandNotSent(_:)``) no longer counts as in force, and is owed: the next
/// ``reconcile(at:)`` (when the broker connection is back) sends it again if it still agrees with the routes.
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

    // Accessories and sources live in dense arrays, found through one index lookup per event; everything else refers
    // to them by slot. An entry that is no longer needed is removed by moving the last one into its slot.
    private var accessoryIndex = SlotIndex()
    private var accessories: [AccessoryEntry] = []
    private var sourceIndex = SlotIndex()
    private var sources: [SourceEntry] = []
    /// The kept sources by activity, and how many are routed: kept as ``setActivity(_:of:)`` and
    /// ``setRoute(of:to:)`` change them, so that the statistics read them without a walk over every source (a
    /// million at a fleet's scale, on the network thread).
    private var activityCounts = CaseCounts<Activity>()
    /// How many sources are routed to an accessory: ``routes``'s count, without building it.
    public private(set) var routeCount = 0
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
    /// Per source listed by more than two accessories, the slots of the third and later ones (see ``SlotList``).
    private var moreListings = SparseTable<BluetoothAddress, [Int32]>()

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
        kept(accessory).flatMap { accessories[$0].routedSource }.map { sources[$0].address }
    }

    /// The last activity `source` reported (idle when it never did, or when the engine no longer keeps it).
    public func activity(of source: BluetoothAddress) -> Activity {
        kept(source).map { sources[$0].activity } ?? .idle
    }

    /// Every route, source to accessory.
    public var routes: [BluetoothAddress: AccessoryID] {
        var routes: [BluetoothAddress: AccessoryID] = [:]
        for source in sources {
            if let accessory = source.routedAccessory {
                routes[source.address] = accessories[accessory].view.id
            }
        }
        return routes
    }

    /// How many sources the engine keeps (those some accessory lists), by their last reported activity.
    public var sourcesByActivity: [Activity: Int] { activityCounts.dictionary }

    /// ``sourcesByActivity`` counted by walking every source: the tests' oracle for the kept counts.
    var walkedSourcesByActivity: [Activity: Int] {
        var counts = CaseCounts<Activity>()
        for source in sources { counts.add(source.activity) }
        return counts.dictionary
    }

    /// How many accessories and sources the engine keeps: what the bounds on its state are about.
    public var footprint: (accessories: Int, sources: Int) { (accessories.count, sources.count) }

    /// When ``tick(at:)`` next has something to do (a rule 5 pause leaving the resume window), if ever.
    public var nextDeadline: Timestamp? { expiries.first?.expiresAt }

    // MARK: - Transitions

    /// An accessory's state changed (placement, sources, registration, staleness).
    public mutating func accessoryChanged(_ view: RoutingAccessory, at now: Timestamp) -> RoutingOutput {
        var output = RoutingOutput()
        guard view.automaticSwitching else {
            // Rule 12: the person switched automatic switching off: the engine lets go of the accessory without a
            // command (what plays on it goes on playing) and does nothing for it until it is back on.
            letGo(of: view.id, into: &output)
            output.nextDeadline = nextDeadline
            return output
        }
        let slot: Int
        let previousView: RoutingAccessory?
        if let known = kept(view.id) {
            slot = known
            previousView = accessories[slot].view
            accessories[slot].view = view
        } else if view.takesPart {
            slot = addAccessory(view)
            previousView = nil
        } else {
            // Rule 1: an accessory that takes no part is none of routing's business.
            output.nextDeadline = nextDeadline
            return output
        }
        let previousSources = previousView?.sources ?? []
        if previousSources != view.sources {
            updateListings(of: slot, from: previousSources, to: view.sources)
        }
        let wasWorn = previousView?.isWorn ?? false
        let isWorn = view.isWorn

        if let source = accessories[slot].routedSource {
            let address = sources[source].address
            if !view.takesPart {
                let reason: SwitchCommand.Reason =
                    view.registration == .registered ? .accessoryIneligible : .registrationEnded
                unroute(source, from: slot, with: .release, reason: reason, at: now, into: &output)
            } else if !view.sources.contains(address) {
                // Rule 7, or rule 12 when the source is still connected but another is pinned.
                let reason: SwitchCommand.Reason =
                    view.connected.contains(address) ? .controlsChanged : .sourceDisconnected
                unroute(source, from: slot, with: .pause, reason: reason, at: now, into: &output)
                if isWorn, !endInterruption(on: slot, by: address, at: now, into: &output),
                    let other = bestCandidate(of: slot, at: now, where: { sources[$0].routedAccessory == nil })
                {
                    route(other, to: slot, reason: reason, at: now, into: &output)
                }
            } else if !isWorn {
                if unroute(source, from: slot, with: .pause, reason: .takenOff, at: now, into: &output) {
                    rememberPause(of: source, off: slot, at: now)
                }
            }
        }

        if isWorn && !wasWorn {
            accessories[slot].wornSince = now
            putOn(slot, at: now, into: &output)
        } else if isWorn && accessories[slot].routedSource == nil && previousSources != view.sources {
            let added = bestCandidate(of: slot, at: now) {
                !previousSources.contains(sources[$0].address) && sources[$0].routedAccessory == nil
            }
            if let added {
                // A source newly connected (rule 6), or newly allowed by the person's pin (rule 12).
                let reason: SwitchCommand.Reason =
                    previousView?.connected == view.connected ? .controlsChanged : .sourceActivated
                route(added, to: slot, reason: reason, at: now, into: &output)
            }
        } else if !isWorn {
            accessories[slot].wornSince = nil
        }
        if !isWorn {
            // Taken off (or out of routing): what a call interrupted is not resumed (rules 5 and 11).
            interruptions[view.id] = nil
        }
        output.routedSource = accessories[slot].routedSource.map { sources[$0].address }
        if !view.takesPart {
            // Its route, if any, was released above.
            removeAccessory(at: slot)
            for address in view.sources { pruneSource(address) }
        }
        for address in previousSources where !view.sources.contains(address) {
            pruneSource(address)
        }
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
            guard report.sequence > sources[source].lastReportSequence else { return output }
            sources[source].lastReportSequence = report.sequence
        }
        let before = sources[source].activity
        if let activity = report.activity {
            setActivity(activity, of: source)
        }
        // A route the device reported before it applied the latest command would undo that command (rule 9).
        let stale = report.applied(before: sources[source].lastIssued, of: epoch)
        let reportedRoute = stale ? nil : report.routedAccessory
        if let reported = reportedRoute {
            setInForce(source, reported)
        }
        let activity = sources[source].activity
        noteReportOfDisplaced(source, report, before: before)
        if before == .call, activity == .idle, let accessory = sources[source].routedAccessory,
            interruptions[accessories[accessory].view.id]?.last?.by == address
        {
            // Rule 11: the call ended where it had displaced something.
            unroute(source, from: accessory, with: .release, reason: .interruptionEnded, at: now, into: &output)
            endInterruption(on: accessory, by: address, at: now, into: &output)
        }
        let becameActive = activity.isActive && activity.priority > before.priority
        if becameActive {
            sources[source].activeSince = now
            // The device plays again on its own: a rule 5 pause is no longer waiting to be resumed.
            pausedByTakeOff[sources[source].address] = nil
        }

        if let reported = reportedRoute, let accessory = kept(reported),
            sources[source].routedAccessory != accessory
        {
            adoptReportedRoute(of: source, to: accessory, into: &output)
        }
        if becameActive, sources[source].routedAccessory == nil {
            activate(source, at: now, into: &output)
        }
        pruneSource(address)
        output.nextDeadline = nextDeadline
        return output
    }

    /// A command this engine issued could not be sent (the bridge is disconnected, beyond its queue's bound). The
    /// device still has what it had: the command no longer counts as in force (rule 9), and it is owed until
    /// ``reconcile(at:)``. Report commands in the order they were issued.
    public mutating func commandNotSent(_ command: SwitchCommand) {
        guard let source = kept(command.source) else { return }
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
            guard let source = kept(address) else { continue }
            for command in commands {
                let routed = sources[source].routedAccessory.map { accessories[$0].view.id }
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

    // MARK: - Restoring

    /// Takes an accessory back as it was published before a restart — with the route it had — without running any
    /// rule: nothing is sent. The route is kept only when it is still possible (worn, listed, source free).
    public mutating func restore(_ view: RoutingAccessory, routedSource: BluetoothAddress?, at now: Timestamp) {
        if let known = kept(view.id), let previous = accessories[known].routedSource {
            // A second retained state of the same accessory (delivered again, or written meanwhile by another bridge)
            // replaces the first: the route comes from it alone. Left in place, a route the new state no longer names
            // would outlive the accessory's slot.
            setRoute(of: previous, to: nil)
            accessories[known].routedSource = nil
        }
        let slot: Int
        if !view.takesPart {
            // Rule 1: none of routing's business (any route an earlier retained state of it gave was dropped above).
            return
        } else if let known = kept(view.id) {
            slot = known
            updateListings(of: slot, from: accessories[slot].view.sources, to: view.sources)
            accessories[slot].view = view
        } else {
            slot = addAccessory(view)
            updateListings(of: slot, from: [], to: view.sources)
        }
        accessories[slot].wornSince = view.isWorn ? now : nil
        guard let address = routedSource, view.isWorn, view.sources.contains(address) else { return }
        let source = sourceSlot(address)
        guard sources[source].routedAccessory == nil || sources[source].routedAccessory == slot else { return }
        setRoute(of: source, to: slot)
        // The bridge sent the route before it stopped: the device has it, unless it says otherwise.
        if !sources[source].reportedRoute {
            setInForce(source, view.id)
        }
        accessories[slot].routedSource = source
    }

    /// Takes a playing device's retained state back after a restart, without running any rule: nothing is sent. What
    /// a device says it is routed to wins over what the bridge remembers sending, in whichever order the two arrive.
    /// Call ``restoringFinished()`` once every state is in.
    public mutating func restoreSource(_ report: SourceReport, from address: BluetoothAddress, at now: Timestamp) {
        let source = sourceSlot(address)
        sources[source].lastReportSequence = max(sources[source].lastReportSequence, report.sequence)
        if let activity = report.activity {
            setActivity(activity, of: source)
            if activity.isActive { sources[source].activeSince = now }
        }
        if let routed = report.routedAccessory {
            setInForce(source, routed)
            sources[source].reportedRoute = true
        }
    }

    /// Ends restoring: forgets the sources routing does not need (see ``restoreSource(_:from:at:)``, which keeps
    /// every source until now so that the order in which states arrive does not matter).
    public mutating func restoringFinished() {
        for index in sources.indices {
            sources[index].reportedRoute = false
        }
        for address in sources.map(\.address) {
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

    /// Rule 4: route the worn accessory's best active candidate, resuming it when rule 5 paused it here.
    private mutating func putOn(_ accessory: Int, at now: Timestamp, into output: inout RoutingOutput) {
        guard let source = bestCandidate(of: accessory, at: now, countingPauses: true, where: { _ in true }) else {
            return
        }
        let resume = resumable(source, on: accessory, at: now)
        route(source, to: accessory, reason: .putOn, at: now, into: &output)
        if resume {
            pausedByTakeOff[sources[source].address] = nil
            issue(.resume, to: source, accessory: accessories[accessory].view.id, reason: .putOn, at: now,
                into: &output)
        }
    }

    /// Rule 6: an unrouted source became active; route it to its most recently worn candidate accessory.
    private mutating func activate(_ source: Int, at now: Timestamp, into output: inout RoutingOutput) {
        // The most recently worn; between equals, the smallest id, so the choice is deterministic.
        var target: Int?
        for candidate in listings(of: source) where accessories[candidate].view.isWorn {
            guard let current = target else {
                target = candidate
                continue
            }
            let (a, b) = (accessories[candidate], accessories[current])
            if (a.wornSince ?? .zero, b.view.id) > (b.wornSince ?? .zero, a.view.id) {
                target = candidate
            }
        }
        guard let target else { return }
        if let displaced = accessories[target].routedSource {
            // Media never takes an accessory from a call.
            guard sources[source].activity == .call || sources[displaced].activity != .call else { return }
            let activity = sources[displaced].activity
            if unroute(displaced, from: target, with: .pause, reason: .sourceActivated, at: now, into: &output),
                sources[source].activity == .call, activity.isActive
            {
                // Rule 11: remember what the call interrupted, and the PAUSE that stopped it.
                interruptions[accessories[target].view.id, default: []].append(
                    Interruption(
                        displaced: sources[displaced].address, activity: activity, by: sources[source].address,
                        pausedWith: sources[displaced].lastIssued, at: now))
            }
        }
        route(source, to: target, reason: .sourceActivated, at: now, into: &output)
    }

    /// A device says it is routed to `accessory`: take that route over when it is possible (the accessory is worn,
    /// lists the source and is free), so that later rules act on it. Nothing is sent.
    private mutating func adoptReportedRoute(of source: Int, to accessory: Int, into output: inout RoutingOutput) {
        let entry = accessories[accessory]
        guard entry.view.isWorn, entry.view.sources.contains(sources[source].address), entry.routedSource == nil
        else { return }
        if let previous = sources[source].routedAccessory {
            accessories[previous].routedSource = nil
            output.noteRerouted(accessories[previous].view.id)
        }
        setRoute(of: source, to: accessory)
        accessories[accessory].routedSource = source
        output.noteRerouted(entry.view.id)
    }

    // MARK: - Primitives

    /// The best active candidate of `accessory` that passes `filter`: a call before media, then the most recently
    /// active. With `countingPauses` (rule 4 only), a source paused by rule 5 off this accessory within the window
    /// counts with its activity at the pause; the other rules route what plays, never what waits to be resumed.
    private func bestCandidate(
        of accessory: Int, at now: Timestamp, countingPauses: Bool = false, where filter: (Int) -> Bool
    ) -> Int? {
        var best: (source: Int, priority: Int, since: Timestamp)?
        // Every listed source has a slot: updateListings gave it one.
        for address in accessories[accessory].view.sources {
            guard let source = kept(address), filter(source) else { continue }
            var activity = sources[source].activity
            if countingPauses, resumable(source, on: accessory, at: now), let paused = pausedByTakeOff[address],
                paused.activity.priority > activity.priority
            {
                activity = paused.activity
            }
            guard activity.isActive else { continue }
            let since = sources[source].activeSince
            if let current = best, (current.priority, current.since) >= (activity.priority, since) { continue }
            best = (source, activity.priority, since)
        }
        return best?.source
    }

    /// Whether rule 5 paused `source` off `accessory` within the resume window.
    private func resumable(_ source: Int, on accessory: Int, at now: Timestamp) -> Bool {
        guard let paused = pausedByTakeOff[sources[source].address] else { return false }
        return paused.accessory == accessories[accessory].view.id
            && now <= paused.at.advanced(byMilliseconds: resumeWindow)
    }

    /// Routes `source` to `accessory`, detaching the source from any other accessory (rule 3), and sends ROUTE unless
    /// the device already has that route (rule 9). The accessory must be free or already routed from `source`.
    private mutating func route(
        _ source: Int, to accessory: Int, reason: SwitchCommand.Reason, at now: Timestamp,
        into output: inout RoutingOutput
    ) {
        if let previous = sources[source].routedAccessory, previous != accessory {
            accessories[previous].routedSource = nil
            output.noteRerouted(accessories[previous].view.id)
        }
        let id = accessories[accessory].view.id
        if reason != .interruptionEnded, let last = interruptions[id]?.last, last.by != sources[source].address {
            // Another source claimed the accessory: nothing is resumed when the call ends (rule 11).
            interruptions[id] = nil
        }
        setRoute(of: source, to: accessory)
        accessories[accessory].routedSource = source
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
        let id = accessories[accessory].view.id
        accessories[accessory].routedSource = nil
        setRoute(of: source, to: nil)
        output.noteRerouted(id)
        guard inForce(source) == id else { return false }
        setInForce(source, nil)
        issue(action, to: source, accessory: id, reason: reason, at: now, into: &output)
        return true
    }

    /// Rule 11: the call by `caller` on `accessory` ended (its source went idle, and was released, or disconnected).
    /// Routes back and resumes the latest source the calls displaced that can still come back, when the accessory
    /// is worn and free; earlier interruptions stay behind it. Returns whether it did.
    @discardableResult
    private mutating func endInterruption(
        on accessory: Int, by caller: BluetoothAddress, at now: Timestamp, into output: inout RoutingOutput
    ) -> Bool {
        let id = accessories[accessory].view.id
        guard var stack = interruptions[id], stack.last?.by == caller else { return false }
        interruptions[id] = nil
        guard accessories[accessory].view.isWorn, accessories[accessory].routedSource == nil else { return false }
        while let entry = stack.popLast() {
            guard let source = kept(entry.displaced), canResume(entry, source, on: accessory, at: now) else {
                continue
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
            && accessories[accessory].view.sources.contains(entry.displaced) && sources[source].routedAccessory == nil
            && (entry.activity != .call || sources[source].activity == .call)
    }

    /// Rule 11: what a displaced source's report says about resuming it. Media that plays again by itself, or that
    /// went idle before the bridge's PAUSE reached it (the person paused it), and a call that ended, do not come back.
    private mutating func noteReportOfDisplaced(
        _ source: Int, _ report: SourceReport, before: Activity
    ) {
        // Most of the time no call interrupted anything.
        guard !interruptions.isEmpty else { return }
        let address = sources[source].address
        for accessory in listings(of: source) {
            let id = accessories[accessory].view.id
            guard let stack = interruptions[id], stack.contains(where: { $0.displaced == address }) else { continue }
            interruptions[id] = stack.map { entry in
                guard entry.displaced == address else { return entry }
                var entry = entry
                let activity = sources[source].activity
                switch entry.activity {
                case .call:
                    if activity == .idle { entry.resumable = false }
                default:
                    // Playing again after it stopped, or something else (a call of its own).
                    let playsItself = activity.isActive && (!before.isActive || activity != entry.activity)
                    let pausedOnDevice =
                        activity == .idle && report.applied(before: entry.pausedWith, of: epoch)
                    if playsItself || pausedOnDevice { entry.resumable = false }
                }
                return entry
            }
        }
    }

    private mutating func rememberPause(of source: Int, off accessory: Int, at now: Timestamp) {
        pausedByTakeOff[sources[source].address] = PausedPlayback(
            accessory: accessories[accessory].view.id, at: now, activity: sources[source].activity)
        expiries.append(source: sources[source].address, expiresAt: now.advanced(byMilliseconds: resumeWindow))
    }

    private mutating func issue(
        _ action: SwitchCommand.Action, to source: Int, accessory: AccessoryID, reason: SwitchCommand.Reason,
        at now: Timestamp, into output: inout RoutingOutput
    ) {
        sources[source].commandSequence += 1
        let sequence = sources[source].commandSequence
        sources[source].hasIssued = true
        highestCommandSequence = max(highestCommandSequence, sequence)
        let address = sources[source].address
        // A new decision supersedes what was owed: it was made knowing those commands did not go out.
        owed[address] = nil
        output.commands.append(
            SwitchCommand(
                id: "\(instanceID)-\(address.topicID)-\(sequence)", sequence: sequence, source: address,
                accessoryID: accessory, action: action, reason: reason, issuedAt: now, epoch: epoch))
    }

    /// Sets what `source` last reported doing, keeping ``sourcesByActivity``.
    private mutating func setActivity(_ activity: Activity, of source: Int) {
        activityCounts.remove(sources[source].activity)
        activityCounts.add(activity)
        sources[source].activity = activity
    }

    /// Routes `source` to the accessory in slot `accessory` (`nil`: to none), keeping ``routeCount``. Only the
    /// source's side: the accessory's ``AccessoryEntry/routedSource`` is the caller's.
    private mutating func setRoute(of source: Int, to accessory: Int?) {
        if sources[source].routedAccessory != nil { routeCount -= 1 }
        if accessory != nil { routeCount += 1 }
        sources[source].routedAccessory = accessory
    }

    /// The slot of accessory `id`, when the engine keeps it.
    private func kept(_ id: AccessoryID) -> Int? {
        accessoryIndex.slot(of: id, in: accessories)
    }

    /// The slot of `address`, when the engine keeps it.
    private func kept(_ address: BluetoothAddress) -> Int? {
        sourceIndex.slot(of: address, in: sources)
    }

    /// The slot of `address`, created on first sight.
    private mutating func sourceSlot(_ address: BluetoothAddress) -> Int {
        if let slot = kept(address) { return slot }
        let slot = sources.count
        let entry = SourceEntry(address: address, commandSequence: highestCommandSequence)
        sources.append(entry)
        activityCounts.add(entry.activity)
        sourceIndex.insert(slot, of: sources)
        return slot
    }

    /// Keeps a new accessory; returns its slot.
    private mutating func addAccessory(_ view: RoutingAccessory) -> Int {
        let slot = accessories.count
        accessories.append(AccessoryEntry(view: view))
        accessoryIndex.insert(slot, of: accessories)
        return slot
    }

    private mutating func updateListings(of accessory: Int, from old: SourcePair, to new: SourcePair) {
        for address in old where !new.contains(address) {
            let source = sourceSlot(address)
            setListings(of: source, to: listings(of: source).filter { $0 != accessory })
        }
        for address in new where !old.contains(address) {
            let source = sourceSlot(address)
            if !sources[source].listedBy.insert(accessory) {
                moreListings[address] = (moreListings[address] ?? []) + [Int32(accessory)]
            }
        }
    }

    /// The slots of the accessories that list `source` (its candidate accessories).
    private func listings(of source: Int) -> [Int] {
        let inline = Array(sources[source].listedBy)
        guard let more = moreListings[sources[source].address] else { return inline }
        return inline + more.map(Int.init)
    }

    /// Keeps `slots` as the accessories that list `source`: two inline, the rest beside.
    private mutating func setListings(of source: Int, to slots: [Int]) {
        var inline = SlotList()
        var more: [Int32] = []
        for slot in slots where !inline.insert(slot) { more.append(Int32(slot)) }
        sources[source].listedBy = inline
        moreListings[sources[source].address] = more.isEmpty ? nil : more
    }

    /// The route the device of `source` has, as far as the engine knows (rule 9).
    private func inForce(_ source: Int) -> AccessoryID? {
        routesInForce[sources[source].address]
    }

    private mutating func setInForce(_ source: Int, _ accessory: AccessoryID?) {
        routesInForce[sources[source].address] = accessory
    }

    /// Rule 12: forgets `id` without a command. Its route, if any, stays in force on the device (rule 9 keeps
    /// knowing it), but the engine no longer counts it as its own.
    private mutating func letGo(of id: AccessoryID, into output: inout RoutingOutput) {
        guard let slot = kept(id) else { return }
        if let source = accessories[slot].routedSource {
            setRoute(of: source, to: nil)
            accessories[slot].routedSource = nil
            output.noteRerouted(id)
        }
        let listed = accessories[slot].view.sources
        removeAccessory(at: slot)
        for address in listed { pruneSource(address) }
    }

    /// Forgets an accessory (it takes no part and has no route), moving the last entry into its slot.
    private mutating func removeAccessory(at slot: Int) {
        precondition(accessories[slot].routedSource == nil, "an accessory is unrouted before it is forgotten")
        updateListings(of: slot, from: accessories[slot].view.sources, to: [])
        accessoryIndex.remove(slot, of: accessories)
        interruptions[accessories[slot].view.id] = nil
        let last = accessories.count - 1
        if slot != last {
            let moved = accessories[last]
            accessories[slot] = moved
            accessoryIndex.move(from: last, to: slot, of: accessories)
            for address in moved.view.sources {
                let source = kept(address)!
                sources[source].listedBy.replace(last, with: slot)
                if var more = moreListings[address] {
                    for index in more.indices where more[index] == Int32(last) { more[index] = Int32(slot) }
                    moreListings[address] = more
                }
            }
            if let source = moved.routedSource {
                setRoute(of: source, to: slot)
            }
        }
        accessories.removeLast()
    }

    /// Forgets a source that routing no longer needs: no accessory lists it, it is idle, unrouted, has no route in
    /// force as far as the engine knows (rule 9 needs that), is not paused within the resume window and is owed
    /// nothing. What it reported last is lost with it; its retained state comes back after a restart, and a device
    /// reports again when it plays.
    private mutating func pruneSource(_ address: BluetoothAddress) {
        guard let slot = kept(address) else { return }
        let entry = sources[slot]
        guard entry.listedBy.isEmpty, entry.routedAccessory == nil, !entry.activity.isActive, routesInForce[address] == nil,
            pausedByTakeOff[address] == nil, owed[address] == nil
        else { return }
        sourceIndex.remove(slot, of: sources)
        activityCounts.remove(entry.activity)
        let last = sources.count - 1
        if slot != last {
            let moved = sources[last]
            sources[slot] = moved
            sourceIndex.move(from: last, to: slot, of: sources)
            if let accessory = moved.routedAccessory {
                accessories[accessory].routedSource = slot
            }
        }
        sources.removeLast()
    }
}

extension RoutingEngine {
    struct AccessoryEntry: SlotIndexed, Sendable {
        var view: RoutingAccessory
        var indexKey: AccessoryID { view.id }
        /// When it last became worn; `nil` while not worn.
        var wornSince: Timestamp?
        /// The slot of the source routed to it.
        @OptionalSlot var routedSource: Int? = nil
    }

    /// Its fields are ordered widest first (48 bytes rather than 72), and what few sources have at a time (a route in
    /// force, commands owed, a rule 5 pause, a third accessory listing it) lives beside it: the engine keeps one for
    /// every source an accessory lists.
    struct SourceEntry: SlotIndexed, Sendable {
        let address: BluetoothAddress
        /// When it last became active.
        var activeSince: Timestamp = .zero
        var lastReportSequence: UInt64 = 0
        /// Where its count of commands stands (its next command takes the next number).
        var commandSequence: UInt64
        /// The slots of the first two accessories that list it (see ``RoutingEngine/listings(of:)``).
        var listedBy = SlotList()
        /// The slot of the accessory it is routed to (rule 3).
        @OptionalSlot var routedAccessory: Int? = nil
        var activity: Activity = .idle
        /// The device's retained state said what it is routed to (restoring only: it wins over the bridge's memory).
        var reportedRoute = false
        /// A command was issued to it since the engine started keeping it (a flag in the padding, where the
        /// sequence itself would take 8 bytes: it is ``commandSequence``).
        var hasIssued = false

        /// The sequence of the last command issued to it since the engine started keeping it (0: none).
        var lastIssued: UInt64 { hasIssued ? commandSequence : 0 }

        var indexKey: BluetoothAddress { address }

        init(address: BluetoothAddress, commandSequence: UInt64) {
            self.address = address
            self.commandSequence = commandSequence
        }
    }

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
