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
    /// Each source's first command has sequence `commandSequenceBase + 1`. A bridge passes a base that grows with
    /// time (its start in milliseconds × 1000), so that sequences keep increasing across its restarts.
    public let commandSequenceBase: UInt64
    /// `policy.resumeWindow` in milliseconds, converted once (see ``Timestamp/advanced(byMilliseconds:)``).
    private let resumeWindow: Int64

    // Accessories and sources live in dense arrays, found through one hash lookup per event; everything else refers
    // to them by slot. Slots are never reused.
    private var accessorySlots: [AccessoryID: Int] = [:]
    private var accessories: [AccessoryEntry] = []
    private var sourceSlots: [BluetoothAddress: Int] = [:]
    private var sources: [SourceEntry] = []
    /// Rule 5 pauses in the order they expire (lazily pruned).
    private var expiries = ExpiryQueue()

    public init(policy: Policy = Policy(), instanceID: String, commandSequenceBase: UInt64 = 0) {
        self.policy = policy
        self.instanceID = instanceID
        self.commandSequenceBase = commandSequenceBase
        self.resumeWindow = policy.resumeWindow.wholeMilliseconds
    }

    // MARK: - Queries

    /// The source routed to `accessory`, if any.
    public func routedSource(for accessory: AccessoryID) -> BluetoothAddress? {
        accessorySlots[accessory].flatMap { accessories[$0].routedSource }.map { sources[$0].address }
    }

    /// The accessory `source` is routed to, if any.
    public func routedAccessory(for source: BluetoothAddress) -> AccessoryID? {
        sourceSlots[source].flatMap { sources[$0].routedAccessory }.map { accessories[$0].view.id }
    }

    /// The last activity `source` reported (idle when it never did).
    public func activity(of source: BluetoothAddress) -> Activity {
        sourceSlots[source].map { sources[$0].activity } ?? .idle
    }

    /// The routing view of `accessory`, as last given to ``accessoryChanged(_:at:slotHint:)``.
    public func accessory(_ id: AccessoryID) -> RoutingAccessory? {
        accessorySlots[id].map { accessories[$0].view }
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

    /// When ``tick(at:)`` next has something to do (a rule 5 pause leaving the resume window), if ever.
    public var nextDeadline: Timestamp? { expiries.first?.expiresAt }

    // MARK: - Transitions

    /// An accessory's state changed (placement, sources, registration, staleness).
    ///
    /// - Parameter slotHint: the ``RoutingOutput/accessorySlot`` an earlier call returned for this accessory, which
    ///   spares a lookup by id; a hint that does not hold that accessory is ignored.
    public mutating func accessoryChanged(_ view: RoutingAccessory, at now: Timestamp, slotHint: Int? = nil)
        -> RoutingOutput
    {
        var output = RoutingOutput()
        let slot: Int
        let previousView: RoutingAccessory?
        if let known = self.slot(of: view.id, hint: slotHint) {
            slot = known
            previousView = accessories[slot].view
            accessories[slot].view = view
        } else {
            slot = accessories.count
            previousView = nil
            accessorySlots[view.id] = slot
            accessories.append(AccessoryEntry(view: view))
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
                unroute(source, from: slot, with: .pause, reason: .sourceDisconnected, at: now, into: &output)
                if isWorn, let other = bestCandidate(of: slot, at: now, where: { sources[$0].routedAccessory == nil }) {
                    route(other, to: slot, reason: .sourceDisconnected, at: now, into: &output)
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
                route(added, to: slot, reason: .sourceActivated, at: now, into: &output)
            }
        } else if !isWorn {
            accessories[slot].wornSince = nil
        }
        output.nextDeadline = nextDeadline
        output.routedSource = accessories[slot].routedSource.map { sources[$0].address }
        output.accessorySlot = slot
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
            sources[source].activity = activity
        }
        if let reported = report.routedAccessory {
            sources[source].inForce = reported
        }
        let activity = sources[source].activity
        let becameActive = activity.isActive && activity.priority > before.priority
        if becameActive {
            sources[source].activeSince = now
            // The device plays again on its own: a rule 5 pause is no longer waiting to be resumed.
            sources[source].pausedByTakeOff = nil
        }

        if let reported = report.routedAccessory, let accessory = accessorySlots[reported],
            sources[source].routedAccessory != accessory
        {
            adoptReportedRoute(of: source, to: accessory, into: &output)
        }
        if becameActive, sources[source].routedAccessory == nil {
            activate(source, at: now, into: &output)
        }
        output.nextDeadline = nextDeadline
        return output
    }

    // MARK: - Restoring

    /// Takes an accessory back as it was published before a restart — with the route it had — without running any
    /// rule: nothing is sent. The route is kept only when it is still possible (worn, listed, source free).
    public mutating func restore(_ view: RoutingAccessory, routedSource: BluetoothAddress?, at now: Timestamp) {
        let slot: Int
        if let known = accessorySlots[view.id] {
            slot = known
            updateListings(of: slot, from: accessories[slot].view.sources, to: view.sources)
            accessories[slot].view = view
        } else {
            slot = accessories.count
            accessorySlots[view.id] = slot
            accessories.append(AccessoryEntry(view: view))
            updateListings(of: slot, from: [], to: view.sources)
        }
        accessories[slot].wornSince = view.isWorn ? now : nil
        guard let address = routedSource, view.isWorn, view.sources.contains(address) else { return }
        let source = sourceSlot(address)
        guard sources[source].routedAccessory == nil || sources[source].routedAccessory == slot else { return }
        sources[source].routedAccessory = slot
        // The bridge sent the route before it stopped: the device has it, unless it says otherwise.
        sources[source].inForce = sources[source].inForce ?? view.id
        accessories[slot].routedSource = source
    }

    /// Takes a playing device's retained state back after a restart, without running any rule: nothing is sent.
    public mutating func restoreSource(_ report: SourceReport, from address: BluetoothAddress, at now: Timestamp) {
        let source = sourceSlot(address)
        sources[source].lastReportSequence = max(sources[source].lastReportSequence, report.sequence)
        if let activity = report.activity {
            sources[source].activity = activity
            if activity.isActive { sources[source].activeSince = now }
        }
        if let routed = report.routedAccessory {
            sources[source].inForce = routed
        }
    }

    /// Lets time pass: forgets rule 5 pauses whose resume window closed. Issues no commands.
    public mutating func tick(at now: Timestamp) -> RoutingOutput {
        while let next = expiries.first, next.expiresAt <= now {
            expiries.removeFirst()
            if let source = sourceSlots[next.source], let paused = sources[source].pausedByTakeOff,
                paused.at.advanced(byMilliseconds: resumeWindow) <= now
            {
                sources[source].pausedByTakeOff = nil
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
            sources[source].pausedByTakeOff = nil
            issue(.resume, to: source, accessory: accessory, reason: .putOn, at: now, into: &output)
        }
    }

    /// Rule 6: an unrouted source became active; route it to its most recently worn candidate accessory.
    private mutating func activate(_ source: Int, at now: Timestamp, into output: inout RoutingOutput) {
        // The most recently worn; between equals, the smallest id, so the choice is deterministic.
        var target: Int?
        for candidate in sources[source].listedBy where accessories[candidate].view.isWorn {
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
            unroute(displaced, from: target, with: .pause, reason: .sourceActivated, at: now, into: &output)
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
        sources[source].routedAccessory = accessory
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
            guard let source = sourceSlots[address], filter(source) else { continue }
            var activity = sources[source].activity
            if countingPauses, resumable(source, on: accessory, at: now), let paused = sources[source].pausedByTakeOff,
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
        guard let paused = sources[source].pausedByTakeOff else { return false }
        return paused.accessory == accessory && now <= paused.at.advanced(byMilliseconds: resumeWindow)
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
        sources[source].routedAccessory = accessory
        accessories[accessory].routedSource = source
        output.noteRerouted(id)
        if sources[source].inForce != id {
            sources[source].inForce = id
            issue(.routeToAccessory, to: source, accessory: accessory, reason: reason, at: now, into: &output)
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
        sources[source].routedAccessory = nil
        output.noteRerouted(id)
        guard sources[source].inForce == id else { return false }
        sources[source].inForce = nil
        issue(action, to: source, accessory: accessory, reason: reason, at: now, into: &output)
        return true
    }

    private mutating func rememberPause(of source: Int, off accessory: Int, at now: Timestamp) {
        sources[source].pausedByTakeOff = PausedPlayback(accessory: accessory, at: now, activity: sources[source].activity)
        expiries.append(source: sources[source].address, expiresAt: now.advanced(byMilliseconds: resumeWindow))
    }

    private mutating func issue(
        _ action: SwitchCommand.Action, to source: Int, accessory: Int, reason: SwitchCommand.Reason,
        at now: Timestamp, into output: inout RoutingOutput
    ) {
        sources[source].commandSequence += 1
        let sequence = sources[source].commandSequence
        output.commands.append(
            SwitchCommand(
                id: Self.commandID(sources[source].commandIDPrefix, sequence), sequence: sequence,
                source: sources[source].address, accessoryID: accessories[accessory].view.id, action: action,
                reason: reason, issuedAt: now))
    }

    /// `prefix` and `sequence` in decimal, built in one allocation (`prefix + String(sequence)` takes two strings
    /// and a growth, for every command).
    static func commandID(_ prefix: String, _ sequence: UInt64) -> String {
        var prefix = prefix
        return prefix.withUTF8 { prefix in
            String(unsafeUninitializedCapacity: prefix.count + 20) { buffer in
                _ = buffer.initialize(fromContentsOf: prefix)
                var digits = 1
                var rest = sequence / 10
                while rest > 0 {
                    digits += 1
                    rest /= 10
                }
                var value = sequence
                for index in stride(from: prefix.count + digits - 1, through: prefix.count, by: -1) {
                    buffer[index] = UInt8(ascii: "0") + UInt8(value % 10)
                    value /= 10
                }
                return prefix.count + digits
            }
        }
    }

    /// The slot of accessory `id`: `hint` when it holds that accessory (slots are never reused), else looked up.
    private func slot(of id: AccessoryID, hint: Int?) -> Int? {
        if let hint, accessories.indices.contains(hint), accessories[hint].view.id == id { return hint }
        return accessorySlots[id]
    }

    /// The slot of `address`, created on first sight.
    private mutating func sourceSlot(_ address: BluetoothAddress) -> Int {
        if let slot = sourceSlots[address] { return slot }
        let slot = sources.count
        sourceSlots[address] = slot
        sources.append(
            SourceEntry(
                address: address, commandIDPrefix: "\(instanceID)-\(address.topicID)-",
                commandSequence: commandSequenceBase))
        return slot
    }

    private mutating func updateListings(of accessory: Int, from old: SourcePair, to new: SourcePair) {
        for address in old where !new.contains(address) {
            sources[sourceSlot(address)].listedBy.removeAll { $0 == accessory }
        }
        for address in new where !old.contains(address) {
            sources[sourceSlot(address)].listedBy.append(accessory)
        }
    }
}

extension RoutingEngine {
    struct AccessoryEntry: Sendable {
        var view: RoutingAccessory
        /// When it last became worn; `nil` while not worn.
        var wornSince: Timestamp?
        /// The slot of the source routed to it.
        var routedSource: Int?
    }

    struct SourceEntry: Sendable {
        let address: BluetoothAddress
        var activity: Activity = .idle
        /// When it last became active.
        var activeSince: Timestamp = .zero
        var lastReportSequence: UInt64 = 0
        /// The slot of the accessory it is routed to (rule 3).
        var routedAccessory: Int?
        /// The route the device has, as far as the engine knows: from its own commands and the device's reports.
        var inForce: AccessoryID?
        /// Rule 5's memory, for rule 4.
        var pausedByTakeOff: PausedPlayback?
        var commandSequence: UInt64 = 0
        /// `{engine instance}-{source}-`: a command's id is this and its sequence.
        let commandIDPrefix: String
        /// The slots of the accessories that list it (its candidate accessories).
        var listedBy: [Int] = []

        init(address: BluetoothAddress, commandIDPrefix: String, commandSequence: UInt64) {
            self.address = address
            self.commandIDPrefix = commandIDPrefix
            self.commandSequence = commandSequence
        }
    }

    struct PausedPlayback: Sendable {
        /// The slot of the accessory it was taken off.
        var accessory: Int
        var at: Timestamp
        var activity: Activity
    }
}
