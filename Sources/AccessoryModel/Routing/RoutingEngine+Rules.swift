/// The routing rules: one function per rule of docs/routing.md (and of ``RoutingEngine``'s list), named after what
/// happens, in the rules' order. The primitives (`RoutingEngine+Primitives.swift`) hold rules 3, 9 and 10, which every
/// other rule goes through.
extension RoutingEngine {

    /// Rule 1: a new accessory is kept only when it takes part (registered, with `.audioSwitching`, not stale):
    /// its row and its view before this change, or `nil` for an accessory that is none of routing's business.
    mutating func keep(_ view: RoutingAccessory) -> (row: Int, previous: RoutingAccessory?)? {
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
    mutating func becameIneligible(
        _ accessory: Int, routedFrom source: Int, at now: Timestamp, into output: inout RoutingOutput
    ) {
        unroute(source, from: accessory, with: .release, reason: .accessoryIneligible, at: now, into: &output)
    }

    /// Rule 4: route the worn accessory's best active candidate, resuming it when rule 5 paused it here.
    mutating func putOn(_ accessory: Int, at now: Timestamp, into output: inout RoutingOutput) {
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
    mutating func takenOff(
        _ accessory: Int, routedFrom source: Int, at now: Timestamp, into output: inout RoutingOutput
    ) {
        if unroute(source, from: accessory, with: .pause, reason: .takenOff, at: now, into: &output) {
            rememberPause(of: source, off: accessory, at: now)
        }
    }

    /// Rule 5's memory, for rule 4: what was paused off which accessory, until the resume window closes.
    mutating func rememberPause(of source: Int, off accessory: Int, at now: Timestamp) {
        pausedByTakeOff[table.sources[source].address] = PausedPlayback(
            accessory: table.accessories[accessory].view.id, at: now, activity: table.sources[source].activity)
        expiries.append(source: table.sources[source].address, expiresAt: now.advanced(byMilliseconds: resumeWindow))
    }

    /// Rule 6: an unrouted source became active; route it to its most recently worn candidate accessory.
    mutating func activate(_ source: Int, at now: Timestamp, into output: inout RoutingOutput) {
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
    mutating func candidatesAdded(
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
    mutating func routedSourceLeft(
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
    mutating func registrationEnded(
        _ accessory: Int, routedFrom source: Int, at now: Timestamp, into output: inout RoutingOutput
    ) {
        unroute(source, from: accessory, with: .release, reason: .registrationEnded, at: now, into: &output)
    }

    /// A device says it is routed to `accessory`: take that route over when it is possible (the accessory is worn,
    /// lists the source and is free), so that later rules act on it; nothing is sent. When another source holds the
    /// accessory, the device is paused off it (rule 3: one source per accessory), and the holder keeps it: a bridge
    /// killed after it routed this device, before the accessory's state was published, leaves its successor to
    /// decide that change again without knowing of that route, and the successor's choice stands.
    mutating func adoptReportedRoute(
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
    mutating func endInterruption(
        on accessory: Int, by caller: BluetoothAddress, at now: Timestamp, into output: inout RoutingOutput
    ) -> Bool {
        let id = table.accessories[accessory].view.id
        guard var stack = interruptions[id], stack.last?.by == caller else { return false }
        interruptions[id] = nil
        guard isWornAndFree(accessory) else { return false }
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
    func canResume(_ entry: Interruption, _ source: Int, on accessory: Int, at now: Timestamp) -> Bool {
        entry.resumable && now <= entry.at.advanced(byMilliseconds: interruptionWindow)
            && table.accessories[accessory].view.sources.contains(entry.displaced)
            && table.sources[source].routedAccessory == nil
            // A shared device another slot took is routed elsewhere.
            && !sharing.isHeldElsewhere(entry.displaced)
            && (entry.activity != .call || table.sources[source].activity == .call)
    }

    /// Rule 11: what a displaced source's report says about resuming it. Media that plays again by itself, or that
    /// went idle before the bridge's PAUSE reached it (the person paused it), and a call that ended, do not come back.
    mutating func noteReportOfDisplaced(
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
    mutating func switchedOff(_ id: AccessoryID, into output: inout RoutingOutput) {
        guard let row = table.kept(id) else { return }
        if let source = table.accessories[row].routedSource {
            table.setRoute(of: source, to: nil)
            table.accessories[row].routedSource = nil
            output.noteRerouted(id)
        }
        let listed = table.accessories[row].view.sources
        removeAccessory(at: row)
        for address in listed { pruneSource(address) }
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
