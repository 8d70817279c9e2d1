/// Rule 13, head tracking: after each transition the engine tells its ``HeadTrackingStateMachine`` where the
/// accessories it touched stand, and passes its events on.
extension RoutingEngine {
    /// The playing device `view`'s session is to have, or `nil` with why it has none: a session exists while the
    /// accessory is registered with `.headTracking`, takes part, is worn and is routed.
    func headTrackingHost(of view: RoutingAccessory, routedSource: BluetoothAddress?)
        -> (host: BluetoothAddress?, otherwise: HeadTrackingEvent.Reason)
    {
        guard view.takesPart, view.automaticSwitching else {
            return (nil, view.registration == .registered ? .ineligible : .registrationEnded)
        }
        guard view.capabilities.contains(.headTracking) else { return (nil, .registrationEnded) }
        guard view.isWorn else { return (nil, .takenOff) }
        return (routedSource, .unrouted)
    }

    /// Rule 13 for accessory `id` after a change that left it as `view` (`nil`: as the table keeps it, or gone).
    mutating func headTrackingChanged(
        _ id: AccessoryID, as view: RoutingAccessory?, at now: Timestamp, into output: inout RoutingOutput
    ) {
        let row = table.kept(id)
        guard let view = view ?? row.map({ table.accessories[$0].view }) else {
            // No longer kept, with no view: whatever session it had ends.
            note(headTracking.update(id, host: nil, otherwise: .registrationEnded, at: now), of: id, into: &output)
            return
        }
        // Most accessories never have a session: no look-up for them.
        guard view.capabilities.contains(.headTracking) || !headTracking.isEmpty else { return }
        let routed = row.flatMap { table.accessories[$0].routedSource }.map { table.sources[$0].address }
        let (host, reason) = headTrackingHost(of: view, routedSource: routed)
        note(headTracking.update(id, host: host, otherwise: reason, at: now), of: id, into: &output)
    }

    /// Rule 13 after `view` changed: for it, and for the accessories whose route the change moved.
    mutating func headTrackingChanged(_ view: RoutingAccessory, at now: Timestamp, into output: inout RoutingOutput) {
        headTrackingChanged(view.id, as: view, at: now, into: &output)
        headTrackingChanged(at: now, into: &output)
    }

    /// Rule 13 for the accessories whose route the output moved (as the table keeps them).
    mutating func headTrackingChanged(at now: Timestamp, into output: inout RoutingOutput) {
        for id in output.rerouted {
            headTrackingChanged(id, as: nil, at: now, into: &output)
        }
    }

    /// Rule 13 after playing device `host` reported its Head Tracking setting: the sessions it hosts hear of a
    /// change, and their accessories' states show it.
    mutating func hostReported(
        _ host: BluetoothAddress, headTracking on: Bool, at now: Timestamp, into output: inout RoutingOutput
    ) {
        for event in headTracking.hostReported(host, headTracking: on, at: now) {
            note([event], of: event.session.accessory, into: &output)
        }
    }

    private func note(_ events: [HeadTrackingEvent], of id: AccessoryID, into output: inout RoutingOutput) {
        guard !events.isEmpty else { return }
        output.headTracking += events
        output.noteRerouted(id)
    }

    // MARK: - Restarts and shutdown

    /// After restoring: every session taken back that no longer follows its route ends, and every accessory that
    /// should have one and has none gets one (a bridge killed between a route and its session's news).
    public mutating func reconcileHeadTracking(at now: Timestamp) -> RoutingOutput {
        var output = RoutingOutput()
        var ids = Set(headTracking.sessions.keys)
        for entry in table.accessories where entry.view.capabilities.contains(.headTracking) {
            ids.insert(entry.view.id)
        }
        for id in ids.sorted() {
            headTrackingChanged(id, as: nil, at: now, into: &output)
        }
        output.nextDeadline = nextDeadline
        return output
    }

    /// A single bridge shuts down: every session ends (nobody takes them over; a cluster's slot does not call it).
    public mutating func shutDown(at now: Timestamp) -> RoutingOutput {
        var output = RoutingOutput()
        output.headTracking = headTracking.shutdown(at: now)
        for event in output.headTracking { output.noteRerouted(event.session.accessory) }
        return output
    }
}
