/// The primitives every rule goes through: rule 3 (`route`, `unroute`: one source per accessory and one accessory
/// per source), rule 9 (nothing repeats what is in force) and rule 10 (`issue`: ids, sequences, reasons, epochs); and
/// what the table keeps.
extension RoutingEngine {
    // MARK: - Primitives

    /// Whether `source` is free for another accessory of this slot: unrouted here, and not held by another slot.
    func isFree(_ source: Int) -> Bool {
        table.sources[source].routedAccessory == nil && !sharing.isHeldElsewhere(table.sources[source].address)
    }

    /// Whether `accessory` is worn and routed from no source: a rule may give it one.
    func isWornAndFree(_ accessory: Int) -> Bool {
        table.accessories[accessory].view.isWorn && table.accessories[accessory].routedSource == nil
    }

    /// Whether `source` may go to `accessory` as one of its candidates now: the accessory worn and free, the source
    /// playing, free, and listed by it.
    func isFreeCandidate(_ source: Int, of accessory: Int) -> Bool {
        isWornAndFree(accessory) && table.sources[source].activity.isActive && isFree(source)
            && table.accessories[accessory].view.sources.contains(table.sources[source].address)
    }

    /// The best active candidate of `accessory` that passes `filter`: a call before media, then the most recently
    /// active. With `countingPauses` (rule 4 only), a source paused by rule 5 off this accessory within the window
    /// counts with its activity at the pause; the other rules route what plays, never what waits to be resumed.
    func bestCandidate(
        of accessory: Int, at now: Timestamp, countingPauses: Bool = false, where filter: (Int) -> Bool
    ) -> Int? {
        var best: (source: Int, priority: Int, since: Timestamp, routedHere: Int)?
        let id = table.accessories[accessory].view.id
        // Every listed source has a row: updateListings gave it one.
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
    func resumable(_ source: Int, on accessory: Int, at now: Timestamp) -> Bool {
        guard let paused = pausedByTakeOff[table.sources[source].address] else { return false }
        return paused.accessory == table.accessories[accessory].view.id
            && now <= paused.at.advanced(byMilliseconds: resumeWindow)
    }

    /// Routes `source` to `accessory`, detaching the source from any other accessory (rule 3), and sends ROUTE unless
    /// the device already has that route (rule 9). The accessory must be free or already routed from `source`.
    mutating func route(
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
    mutating func unroute(
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

    mutating func issue(
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
    func inForce(_ source: Int) -> AccessoryID? {
        routesInForce[table.sources[source].address]
    }

    mutating func setInForce(_ source: Int, _ accessory: AccessoryID?) {
        routesInForce[table.sources[source].address] = accessory
    }

    // MARK: - What the table keeps
    //
    // The table stores; what routing still needs, and so what it keeps, is decided here.

    /// The row of `address`, created on first sight (its commands counting on above every sequence issued).
    mutating func sourceRow(_ address: BluetoothAddress) -> Int {
        table.sourceRow(address, commandSequence: highestCommandSequence)
    }

    mutating func updateListings(of accessory: Int, from old: SourcePair, to new: SourcePair) {
        table.updateListings(of: accessory, from: old, to: new, commandSequence: highestCommandSequence)
    }

    /// After an accessory changed: forgets it when it no longer takes part (its route was released), and the sources
    /// it listed that routing no longer needs.
    mutating func forgetUnneeded(_ accessory: Int, listedBefore: SourcePair) {
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
    mutating func removeAccessory(at row: Int) {
        interruptions[table.accessories[row].view.id] = nil
        table.removeAccessory(at: row, commandSequence: highestCommandSequence)
    }

    /// Forgets a source that routing no longer needs: no accessory lists it, it is idle, unrouted, has no route in
    /// force as far as the engine knows (rule 9 needs that), is not paused within the resume window and is owed
    /// nothing. What it reported last is lost with it; its retained state comes back after a restart, and a device
    /// reports again when it plays.
    mutating func pruneSource(_ address: BluetoothAddress) {
        guard let row = table.kept(address) else { return }
        let entry = table.sources[row]
        guard entry.listedBy.isEmpty, entry.routedAccessory == nil, !entry.activity.isActive, routesInForce[address] == nil,
            pausedByTakeOff[address] == nil, owed[address] == nil
        else { return }
        table.removeSource(at: row)
    }
}

extension SourceReport {
    /// Whether the device says it had not yet applied this engine's command `sequence` (of `epoch`) when it reported:
    /// the last command it applied comes before it (0: no such command, never).
    func applied(before sequence: UInt64, of epoch: UInt64) -> Bool {
        guard sequence != 0, let last = lastCommand else { return false }
        return last < CommandOrder(epoch: epoch, sequence: sequence)
    }
}
