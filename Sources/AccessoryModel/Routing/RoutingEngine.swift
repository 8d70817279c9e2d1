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
/// 13. **Head tracking** (iOS 27): an accessory registered with `.headTracking` that takes part, is worn and is routed
///     has a session with the playing device routed to it, its host; the session follows the route (the old host's
///     invalidated before the new host's is activated), and ends when the accessory is taken off, unrouted,
///     unregistered or no longer takes part, or the bridge shuts down (``HeadTrackingEvent/Reason``). The host's
///     Head Tracking setting is told as a change of state. The frames go from the hub straight to the host: the
///     bridge never sees one (``HeadTrackingStateMachine``).
///
/// The engine is split by theme, as swift-nio's `ByteBuffer-core.swift`, `-aux`, `-int`: this file holds its state,
/// its queries and its transitions; each rule is one function in `RoutingEngine+Rules.swift`, named after what happens
/// (docs/routing.md maps them), and goes through the primitives `route`, `unroute` and `issue` (rules 3, 9 and 10) in
/// `RoutingEngine+Primitives.swift`; restarts are in `RoutingEngine+Restore.swift`, and a cluster's shared devices in
/// `RoutingEngine+SharedDevices.swift`. ``RoutingTable`` stores the accessories and sources and decides nothing.
///
/// A command the bridge could not send (``commandNotSent(_:)``) no longer counts as in force, and is owed: the next
/// ``reconcile(at:)`` (when the broker connection is back) sends it again if it still agrees with the routes.
///
/// In a cluster, a playing device that accessories of other slots list too is routed only while this slot holds it:
/// where a rule would route a shared device it does not hold, the engine asks for it (``DeviceClaim``) and runs the
/// rule again when etcd answered; a device another slot holds counts as routed elsewhere. Those decisions are the
/// sub-machine ``SharedDeviceStateMachine``'s; the engine runs what it hands back.
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
    let resumeWindow: Int64
    /// `policy.interruptionWindow` in milliseconds.
    let interruptionWindow: Int64

    /// The accessories and sources, in rows: storage, no decisions.
    var table = RoutingTable()
    /// How many sources are routed to an accessory: ``routes``'s count, without building it.
    public var routeCount: Int { table.routeCount }
    /// Rule 5 pauses in the order they expire (lazily pruned).
    var expiries = ExpiryQueue()
    /// The highest command sequence issued, where a new source's count starts.
    var highestCommandSequence: UInt64
    // What only a few sources have at a time lives beside their entries, not in each of them.
    /// Per source, the commands that could not be sent, in order, until ``reconcile(at:)``.
    var owed: [BluetoothAddress: [SwitchCommand]] = [:]
    /// Rule 5's memory, for rule 4: the sources paused by a take-off, while their resume window is open.
    var pausedByTakeOff: [BluetoothAddress: PausedPlayback] = [:]
    /// Rule 11's memory: per accessory, the sources calls displaced from it, oldest first. Only while calls last.
    var interruptions: [AccessoryID: [Interruption]] = [:]
    /// Rule 9's memory: per source, the route its device has as far as the engine knows, from the engine's own
    /// commands and the device's reports. Only the sources that have one: routed ones, mostly.
    var routesInForce = SparseTable<BluetoothAddress, AccessoryID>()
    /// While restoring: since when every device restored as active counts as active. A restart cannot tell which
    /// played last, so they are all as recent as each other (a tie in rule 4's "most recently active", which
    /// `bestCandidate` breaks).
    var restoredActiveSince: Timestamp?
    /// In a cluster, the devices other slots list too: which this slot holds, which it waits for.
    var sharing = SharedDeviceStateMachine()
    /// Rule 13: the head-tracking sessions, and the hosts' settings.
    var headTracking: HeadTrackingStateMachine

    /// - Parameter sessionKey: what makes head-tracking session ids unguessable (rule 13): the shell draws it from the
    ///   system's random generator; the default is for tests.
    public init(
        policy: Policy = Policy(), instanceID: String, commandSequenceBase: UInt64 = 0, epoch: UInt64 = 0,
        sessionKey: SessionKey = SessionKey(0, 0)
    ) {
        self.policy = policy
        self.instanceID = instanceID
        self.commandSequenceBase = commandSequenceBase
        self.epoch = epoch
        self.highestCommandSequence = commandSequenceBase
        self.resumeWindow = policy.resumeWindow.wholeMilliseconds
        self.interruptionWindow = policy.interruptionWindow.wholeMilliseconds
        headTracking = HeadTrackingStateMachine(key: sessionKey, epoch: epoch, sequenceBase: commandSequenceBase)
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

    /// The head-tracking session of `accessory` in force (rule 13), if any.
    public func headTrackingSession(of accessory: AccessoryID) -> HeadTrackingSession? {
        headTracking.session(of: accessory)
    }

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

    /// When ``tick(at:)`` next has something to do (a rule 5 pause leaving the resume window; in a cluster, rule 6
    /// looking again at a device it stood back for), if ever.
    public var nextDeadline: Timestamp? {
        let expiry = expiries.first?.expiresAt
        guard let lookAgain = sharing.nextLookAgain else { return expiry }
        return expiry.map { min($0, lookAgain) } ?? lookAgain
    }

    // MARK: - Transitions

    /// An accessory's state changed (placement, sources, registration, staleness, the person's controls): the rules
    /// it concerns, in this order.
    public mutating func accessoryChanged(_ view: RoutingAccessory, at now: Timestamp) -> RoutingOutput {
        var output = RoutingOutput()
        guard view.automaticSwitching else {
            switchedOff(view.id, into: &output)
            tellWorn(view.id, into: &output)
            releaseUnrouted(into: &output)
            headTrackingChanged(view, at: now, into: &output)
            output.nextDeadline = nextDeadline
            return output
        }
        guard let (row, previous) = keep(view) else {
            headTrackingChanged(view, at: now, into: &output)
            output.nextDeadline = nextDeadline
            return output
        }
        let listedBefore = previous?.sources ?? []
        if listedBefore != view.sources {
            updateListings(of: row, from: listedBefore, to: view.sources)
        }
        let wasWorn = previous?.isWorn ?? false

        if let source = table.accessories[row].routedSource {
            if !view.takesPart {
                if view.registration == .registered {
                    becameIneligible(row, routedFrom: source, at: now, into: &output)
                } else {
                    registrationEnded(row, routedFrom: source, at: now, into: &output)
                }
            } else if !view.sources.contains(table.sources[source].address) {
                routedSourceLeft(row, source, at: now, into: &output)
            } else if !view.isWorn {
                takenOff(row, routedFrom: source, at: now, into: &output)
            }
        }
        if view.isWorn && !wasWorn {
            table.accessories[row].wornSince = now
            putOn(row, at: now, into: &output)
        } else if view.isWorn && table.accessories[row].routedSource == nil && listedBefore != view.sources {
            candidatesAdded(row, previous: previous, at: now, into: &output)
        } else if !view.isWorn {
            table.accessories[row].wornSince = nil
        }
        if !view.isWorn {
            // Taken off (or out of routing): what a call interrupted is not resumed (rules 5 and 11).
            interruptions[view.id] = nil
        }
        output.routedSource = table.accessories[row].routedSource.map { table.sources[$0].address }
        forgetUnneeded(row, listedBefore: listedBefore)
        tellWorn(view.id, into: &output)
        releaseUnrouted(into: &output)
        headTrackingChanged(view, at: now, into: &output)
        output.nextDeadline = nextDeadline
        return output
    }

    /// A playing device reported its state.
    public mutating func sourceReported(_ report: SourceReport, from address: BluetoothAddress, at now: Timestamp)
        -> RoutingOutput
    {
        var output = RoutingOutput(nextDeadline: nextDeadline)
        let source = sourceRow(address)
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
        sharing.reported(address, routedTo: report.routedAccessory, applied: report.lastCommandEpoch)
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
        hostReported(address, headTracking: report.headTracking, at: now, into: &output)
        headTrackingChanged(at: now, into: &output)
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

    /// Lets time pass: forgets rule 5 pauses whose resume window closed; in a cluster, runs rule 6 again for a device
    /// it stood back for that still plays unrouted (its claim goes out again: ``SharedDeviceStateMachine``).
    public mutating func tick(at now: Timestamp) -> RoutingOutput {
        var output = RoutingOutput()
        while let next = expiries.first, next.expiresAt <= now {
            expiries.removeFirst()
            if let paused = pausedByTakeOff[next.source], paused.at.advanced(byMilliseconds: resumeWindow) <= now {
                pausedByTakeOff[next.source] = nil
                pruneSource(next.source)
            }
        }
        var looked = false
        for address in sharing.dueToLookAgain(at: now) {
            guard let source = table.kept(address), table.sources[source].activity.isActive,
                table.sources[source].routedAccessory == nil
            else { continue }
            activate(source, at: now, into: &output)
            looked = true
        }
        if looked {
            releaseUnrouted(into: &output)
            headTrackingChanged(at: now, into: &output)
        }
        output.nextDeadline = nextDeadline
        return output
    }
}
