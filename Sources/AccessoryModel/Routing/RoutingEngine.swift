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
public struct RoutingEngine: Sendable {
    /// Timings of the routing rules.
    public struct Policy: Hashable, Sendable {
        /// How long after rule 5 paused a source putting the accessory back on also resumes it (rule 4).
        public var resumeWindow: Duration = .seconds(15)

        public init(resumeWindow: Duration = .seconds(15)) {
            self.resumeWindow = resumeWindow
        }
    }

    public let policy: Policy
    /// Prefix of every command id; distinct per engine instance so ids stay unique across restarts.
    public let instanceID: String

    private var accessories: [AccessoryID: AccessoryEntry] = [:]
    private var sources: [BluetoothAddress: SourceEntry] = [:]
    /// For each source, the accessories that list it (its candidate accessories).
    private var listedBy: [BluetoothAddress: [AccessoryID]] = [:]
    /// Rule 5 pauses in the order they expire (lazily pruned).
    private var expiries = ExpiryQueue()

    public init(policy: Policy = Policy(), instanceID: String) {
        self.policy = policy
        self.instanceID = instanceID
    }

    // MARK: - Queries

    /// The source routed to `accessory`, if any.
    public func routedSource(for accessory: AccessoryID) -> BluetoothAddress? {
        accessories[accessory]?.routedSource
    }

    /// The accessory `source` is routed to, if any.
    public func routedAccessory(for source: BluetoothAddress) -> AccessoryID? {
        sources[source]?.routedAccessory
    }

    /// The last activity `source` reported (idle when it never did).
    public func activity(of source: BluetoothAddress) -> Activity {
        sources[source]?.activity ?? .idle
    }

    /// The routing view of `accessory`, as last given to ``accessoryChanged(_:at:)``.
    public func accessory(_ id: AccessoryID) -> RoutingAccessory? {
        accessories[id]?.view
    }

    /// Every route, source to accessory.
    public var routes: [BluetoothAddress: AccessoryID] {
        sources.compactMapValues(\.routedAccessory)
    }

    /// When ``tick(at:)`` next has something to do (a rule 5 pause leaving the resume window), if ever.
    public var nextDeadline: Timestamp? { expiries.first?.expiresAt }

    // MARK: - Transitions

    /// An accessory's state changed (placement, sources, registration, staleness).
    public mutating func accessoryChanged(_ view: RoutingAccessory, at now: Timestamp) -> RoutingOutput {
        let id = view.id
        let previous = accessories[id]
        let wasWorn = previous?.view.isWorn ?? false
        let previousSources = previous?.view.sources ?? []
        accessories[id] = AccessoryEntry(view: view, wornSince: previous?.wornSince, routedSource: previous?.routedSource)
        updateListings(of: id, from: previousSources, to: view.sources)

        var output = RoutingOutput()
        let isWorn = view.isWorn
        if let source = previous?.routedSource {
            if !view.takesPart {
                let reason: SwitchCommand.Reason =
                    view.registration == .registered ? .accessoryIneligible : .registrationEnded
                unroute(source, from: id, with: .release, reason: reason, at: now, into: &output)
            } else if !view.sources.contains(source) {
                unroute(source, from: id, with: .pause, reason: .sourceDisconnected, at: now, into: &output)
                if isWorn, let other = bestCandidate(of: view, at: now, where: { sources[$0]?.routedAccessory == nil }) {
                    route(other, to: id, reason: .sourceDisconnected, at: now, into: &output)
                }
            } else if !isWorn {
                let paused = unroute(source, from: id, with: .pause, reason: .takenOff, at: now, into: &output)
                if paused {
                    rememberPause(of: source, off: id, at: now)
                }
            }
        }

        if isWorn && !wasWorn {
            accessories[id]?.wornSince = now
            putOn(id, at: now, into: &output)
        } else if isWorn && accessories[id]?.routedSource == nil {
            let added = view.sources.filter { !previousSources.contains($0) }
            if let source = bestCandidate(of: view, at: now, where: { added.contains($0) && sources[$0]?.routedAccessory == nil }) {
                route(source, to: id, reason: .sourceActivated, at: now, into: &output)
            }
        } else if !isWorn {
            accessories[id]?.wornSince = nil
        }
        output.nextDeadline = nextDeadline
        return output
    }

    /// A playing device reported its state.
    public mutating func sourceReported(_ report: SourceReport, from source: BluetoothAddress, at now: Timestamp)
        -> RoutingOutput
    {
        var output = RoutingOutput(nextDeadline: nextDeadline)
        var entry = sources[source] ?? SourceEntry()
        if report.sequence != 0 {
            // An old or repeated report changes nothing.
            guard report.sequence > entry.lastReportSequence else { return output }
            entry.lastReportSequence = report.sequence
        }
        let before = entry.activity
        if let activity = report.activity {
            entry.activity = activity
        }
        if let reported = report.routedAccessory {
            entry.inForce = reported
        }
        let becameActive = entry.activity.isActive && entry.activity.priority > before.priority
        if becameActive {
            entry.activeSince = now
            // The device plays again on its own: a rule 5 pause is no longer waiting to be resumed.
            entry.pausedByTakeOff = nil
        }
        sources[source] = entry

        if let reported = report.routedAccessory, entry.routedAccessory != reported {
            adoptReportedRoute(of: source, to: reported, into: &output)
        }
        if becameActive, sources[source]?.routedAccessory == nil {
            activate(source, at: now, into: &output)
        }
        output.nextDeadline = nextDeadline
        return output
    }

    /// Lets time pass: forgets rule 5 pauses whose resume window closed. Issues no commands.
    public mutating func tick(at now: Timestamp) -> RoutingOutput {
        while let next = expiries.first, next.expiresAt <= now {
            expiries.removeFirst()
            if let paused = sources[next.source]?.pausedByTakeOff, paused.at + policy.resumeWindow <= now {
                sources[next.source]?.pausedByTakeOff = nil
            }
        }
        return RoutingOutput(nextDeadline: nextDeadline)
    }

    // MARK: - Rules

    /// Rule 4: route the worn accessory's best active candidate, resuming it when rule 5 paused it here.
    private mutating func putOn(_ id: AccessoryID, at now: Timestamp, into output: inout RoutingOutput) {
        guard let view = accessories[id]?.view, let source = bestCandidate(of: view, at: now, countingPauses: true, where: { _ in true })
        else { return }
        let resume = resumable(source, on: id, at: now)
        route(source, to: id, reason: .putOn, at: now, into: &output)
        if resume {
            sources[source]?.pausedByTakeOff = nil
            issue(.resume, to: source, accessory: id, reason: .putOn, at: now, into: &output)
        }
    }

    /// Rule 6: an unrouted source became active; route it to its most recently worn candidate accessory.
    private mutating func activate(_ source: BluetoothAddress, at now: Timestamp, into output: inout RoutingOutput) {
        let worn = (listedBy[source] ?? []).compactMap { accessories[$0] }.filter(\.view.isWorn)
        // The most recently worn; between equals, the smallest id, so the choice is deterministic.
        guard
            let target = worn.max(by: { ($0.wornSince ?? .zero, $1.view.id) < ($1.wornSince ?? .zero, $0.view.id) })
        else { return }
        let id = target.view.id
        let activity = sources[source]?.activity ?? .idle
        if let displaced = target.routedSource {
            // Media never takes an accessory from a call.
            guard activity == .call || sources[displaced]?.activity != .call else { return }
            unroute(displaced, from: id, with: .pause, reason: .sourceActivated, at: now, into: &output)
        }
        route(source, to: id, reason: .sourceActivated, at: now, into: &output)
    }

    /// A device says it is routed to `accessory`: take that route over when it is possible (the accessory is worn,
    /// lists the source and is free), so that later rules act on it. Nothing is sent.
    private mutating func adoptReportedRoute(
        of source: BluetoothAddress, to accessory: AccessoryID, into output: inout RoutingOutput
    ) {
        guard let entry = accessories[accessory], entry.view.isWorn, entry.view.sources.contains(source),
            entry.routedSource == nil
        else { return }
        if let previous = sources[source]?.routedAccessory {
            accessories[previous]?.routedSource = nil
            output.rerouted.insert(previous)
        }
        sources[source]?.routedAccessory = accessory
        accessories[accessory]?.routedSource = source
        output.rerouted.insert(accessory)
    }

    // MARK: - Primitives

    /// The best candidate of `view` that passes `filter` and is active: a call before media, then the most recently
    /// active. A source paused by rule 5 off this accessory within the window counts with its activity at the pause.
    /// Only rule 4 passes `countingPauses`: the other rules route what is playing, never what waits to be resumed.
    private func bestCandidate(
        of view: RoutingAccessory, at now: Timestamp, countingPauses: Bool = false,
        where filter: (BluetoothAddress) -> Bool
    ) -> BluetoothAddress? {
        var best: (source: BluetoothAddress, priority: Int, since: Timestamp)?
        for source in view.sources where filter(source) {
            let entry = sources[source] ?? SourceEntry()
            var activity = entry.activity
            if countingPauses, resumable(source, on: view.id, at: now), let paused = entry.pausedByTakeOff,
                paused.activity.priority > activity.priority
            {
                activity = paused.activity
            }
            guard activity.isActive else { continue }
            let candidate = (source, activity.priority, entry.activeSince)
            if let current = best, (current.priority, current.since) >= (candidate.1, candidate.2) { continue }
            best = candidate
        }
        return best?.source
    }

    /// Whether rule 5 paused `source` off `accessory` within the resume window.
    private func resumable(_ source: BluetoothAddress, on accessory: AccessoryID, at now: Timestamp) -> Bool {
        guard let paused = sources[source]?.pausedByTakeOff else { return false }
        return paused.accessory == accessory && now <= paused.at + policy.resumeWindow
    }

    /// Routes `source` to `accessory`, detaching the source from any other accessory (rule 3), and sends ROUTE unless
    /// the device already has that route (rule 9). The accessory must be free or already routed from `source`.
    private mutating func route(
        _ source: BluetoothAddress, to accessory: AccessoryID, reason: SwitchCommand.Reason, at now: Timestamp,
        into output: inout RoutingOutput
    ) {
        var entry = sources[source] ?? SourceEntry()
        if let previous = entry.routedAccessory, previous != accessory {
            accessories[previous]?.routedSource = nil
            output.rerouted.insert(previous)
        }
        entry.routedAccessory = accessory
        let alreadyInForce = entry.inForce == accessory
        entry.inForce = accessory
        sources[source] = entry
        accessories[accessory]?.routedSource = source
        output.rerouted.insert(accessory)
        if !alreadyInForce {
            issue(.routeToAccessory, to: source, accessory: accessory, reason: reason, at: now, into: &output)
        }
    }

    /// Ends the route of `source` to `accessory` with PAUSE or RELEASE, which is sent only when the device is routed
    /// there (rule 9). Returns whether it was sent.
    @discardableResult
    private mutating func unroute(
        _ source: BluetoothAddress, from accessory: AccessoryID, with action: SwitchCommand.Action,
        reason: SwitchCommand.Reason, at now: Timestamp, into output: inout RoutingOutput
    ) -> Bool {
        accessories[accessory]?.routedSource = nil
        output.rerouted.insert(accessory)
        sources[source]?.routedAccessory = nil
        guard sources[source]?.inForce == accessory else { return false }
        sources[source]?.inForce = nil
        issue(action, to: source, accessory: accessory, reason: reason, at: now, into: &output)
        return true
    }

    private mutating func rememberPause(of source: BluetoothAddress, off accessory: AccessoryID, at now: Timestamp) {
        let activity = sources[source]?.activity ?? .idle
        sources[source]?.pausedByTakeOff = PausedPlayback(accessory: accessory, at: now, activity: activity)
        expiries.append(source: source, expiresAt: now + policy.resumeWindow)
    }

    private mutating func issue(
        _ action: SwitchCommand.Action, to source: BluetoothAddress, accessory: AccessoryID,
        reason: SwitchCommand.Reason, at now: Timestamp, into output: inout RoutingOutput
    ) {
        let sequence = (sources[source]?.commandSequence ?? 0) + 1
        sources[source, default: SourceEntry()].commandSequence = sequence
        output.commands.append(
            SwitchCommand(
                id: "\(instanceID)-\(source.topicID)-\(sequence)", sequence: sequence, source: source,
                accessoryID: accessory, action: action, reason: reason, issuedAt: now))
    }

    private mutating func updateListings(
        of id: AccessoryID, from old: [BluetoothAddress], to new: [BluetoothAddress]
    ) {
        guard old != new else { return }
        for source in old where !new.contains(source) {
            listedBy[source]?.removeAll { $0 == id }
            if listedBy[source]?.isEmpty == true { listedBy[source] = nil }
        }
        for source in new where !old.contains(source) {
            listedBy[source, default: []].append(id)
        }
    }
}

extension RoutingEngine {
    struct AccessoryEntry: Sendable {
        var view: RoutingAccessory
        /// When it last became worn; `nil` while not worn.
        var wornSince: Timestamp?
        var routedSource: BluetoothAddress?
    }

    struct SourceEntry: Sendable {
        var activity: Activity = .idle
        /// When it last became active.
        var activeSince: Timestamp = .zero
        var lastReportSequence: UInt64 = 0
        /// The engine's route (rule 3).
        var routedAccessory: AccessoryID?
        /// The route the device has, as far as the engine knows: from its own commands and the device's reports.
        var inForce: AccessoryID?
        /// Rule 5's memory, for rule 4.
        var pausedByTakeOff: PausedPlayback?
        var commandSequence: UInt64 = 0
    }

    struct PausedPlayback: Sendable {
        var accessory: AccessoryID
        var at: Timestamp
        var activity: Activity
    }
}
