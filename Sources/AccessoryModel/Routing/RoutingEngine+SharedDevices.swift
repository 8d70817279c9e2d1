/// The engine's side of the shared devices of a cluster: etcd's news go to the slot's ``SharedDeviceStateMachine``,
/// and the engine runs what it hands back with its own rules (as postgres-nio's `ConnectionStateMachine` passes its
/// sub-machines' actions up with `modify(with:)`).
extension RoutingEngine {
    // MARK: - Shared devices (a cluster)

    /// What etcd said about a shared device; then a device held and no longer routed is let go.
    public mutating func sharedDevice(_ event: SharedDeviceEvent, at now: Timestamp) -> RoutingOutput {
        var output = RoutingOutput()
        switch event {
        case .shared(let address, let isShared), .listed(let address, let isShared):
            let source = table.kept(address)
            let routedTo = source.flatMap { table.sources[$0].routedAccessory }.map { table.accessories[$0].view.id }
            let (changed, action) = sharing.shared(address, isShared, routedTo: routedTo, kept: source != nil)
            if let source {
                if changed {
                    for accessory in table.listings(of: source) {
                        tellWorn(table.accessories[accessory].view.id, into: &output)
                    }
                }
                run(action, for: source, at: now, into: &output)
            }
        case .claimed(let address, let epoch):
            let action = sharing.claimed(address, epoch: epoch)
            if let source = table.kept(address) { run(action, for: source, at: now, into: &output) }
        case .claimRefused(let address, let holderEpoch):
            let action = sharing.claimRefused(address, holderEpoch: holderEpoch)
            if let source = table.kept(address) { run(action, for: source, at: now, into: &output) }
        case .claimWithdrawn(let address):
            sharing.claimWithdrawn(address, at: now)
        case .heldElsewhere(let address, let epoch):
            let source = table.kept(address)
            let routedTo = source.flatMap { table.sources[$0].routedAccessory }.map { table.accessories[$0].view.id }
            let action = sharing.heldElsewhere(address, epoch: epoch, routedTo: routedTo)
            if let source { run(action, for: source, at: now, into: &output) }
        case .releasedElsewhere(let address):
            let action = sharing.releasedElsewhere(address)
            if let source = table.kept(address) { run(action, for: source, at: now, into: &output) }
        }
        releaseUnrouted(into: &output)
        headTrackingChanged(at: now, into: &output)
        output.nextDeadline = nextDeadline
        return output
    }

    /// An accessory of this slot lists `source` now, and none did: until the shell confirms whether another slot
    /// lists it too, it waits like a shared device. Nothing is sent.
    public mutating func deviceListed(_ source: BluetoothAddress) {
        sharing.listed(source)
    }

    /// No accessory of this slot lists `source` any more. A device it held is let go after this change's commands.
    public mutating func deviceUnlisted(_ source: BluetoothAddress) {
        sharing.unlisted(source)
    }

    /// Runs what the shared devices' sub-machine decided for `source`.
    private mutating func run(
        _ action: SharedDeviceStateMachine.Action, for source: Int, at now: Timestamp, into output: inout RoutingOutput
    ) {
        switch action {
        case .none:
            return
        case .decideAgain(let pending):
            decideAgain(pending, for: source, at: now, into: &output)
        case .claim(let claim):
            output.claims.append(claim)
        case .dropRoute:
            dropRoute(of: source, into: &output)
        case .reclaim(let id):
            // As a free candidate of a worn, free accessory: claimed if free, routed (a ROUTE of the new epoch) while
            // the device plays.
            guard let accessory = table.kept(id), isFreeCandidate(source, of: accessory),
                mayRoute(source, to: accessory, for: .candidate(.sourceActivated), into: &output)
            else { return }
            route(source, to: accessory, reason: .sourceActivated, at: now, into: &output)
        case .lost(let pending):
            dropRoute(of: source, into: &output)
            guard let pending, let accessory = table.kept(pending.accessory) else { return }
            if case .interruption(let caller) = pending.rule {
                // Another slot has it: what else the calls displaced may come back.
                endInterruption(on: accessory, by: caller, at: now, into: &output)
            } else if pending.rule == .putOn || pending.rule.isCandidate, isWornAndFree(accessory),
                let other = bestCandidate(of: accessory, at: now, where: isFree),
                mayRoute(other, to: accessory, for: .candidate(.sourceActivated), into: &output)
            {
                // The accessory that waited gets its best other free candidate.
                route(other, to: accessory, reason: .sourceActivated, at: now, into: &output)
            }
        }
    }

    /// Runs again a decision that waited for `source` (now held, or no longer shared), when what it was about still
    /// holds.
    private mutating func decideAgain(
        _ pending: SharedDeviceStateMachine.Pending, for source: Int, at now: Timestamp,
        into output: inout RoutingOutput
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
        case .putOn:
            guard let accessory = table.kept(pending.accessory), isWornAndFree(accessory) else { return }
            putOn(accessory, at: now, into: &output)
        case .candidate(let reason):
            guard let accessory = table.kept(pending.accessory), isFreeCandidate(source, of: accessory) else { return }
            route(source, to: accessory, reason: reason, at: now, into: &output)
        }
    }

    // MARK: - What the rules ask

    /// Whether `source` may be routed to `accessory` now (see ``SharedDeviceStateMachine/mayRoute(_:to:for:)``);
    /// its claim, if any, goes into the output.
    mutating func mayRoute(
        _ source: Int, to accessory: Int, for rule: SharedDeviceStateMachine.Rule, into output: inout RoutingOutput
    ) -> Bool {
        let (allowed, claim) = sharing.mayRoute(
            table.sources[source].address, to: table.accessories[accessory].view.id, for: rule)
        if let claim { output.claims.append(claim) }
        return allowed
    }

    /// Tells the shell which shared devices accessory `id` lists while worn, as it changed (``WornListing``).
    mutating func tellWorn(_ id: AccessoryID, into output: inout RoutingOutput) {
        guard sharing.tracksWorn else { return }
        let worn = table.kept(id).map { table.accessories[$0].view }.flatMap { $0.isWorn ? $0.sources : nil } ?? []
        output.worn += sharing.wornChanged(id, listing: worn)
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
    mutating func releaseUnrouted(into output: inout RoutingOutput) {
        guard sharing.holdsAny else { return }
        output.releases += sharing.releases { address in
            table.kept(address).flatMap { table.sources[$0].routedAccessory } != nil
        }
    }
}
