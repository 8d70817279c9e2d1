/// Routing rule 13, **head tracking**, as a sub-machine of the ``RoutingEngine`` (as its shared devices are): an
/// accessory registered with ``Capabilities/headTracking`` that takes part, is worn and is routed to a playing device
/// has a session with that device, the **host**; the session follows the route, the old host's invalidated before
/// the new host's is activated; taking the accessory off, the route's end, unpairing, invalidation, a stale hub or a
/// shutdown invalidate it. The person's Head Tracking setting on the host (part of the host's reports) is told as a
/// change of state. Every event carries the order of the accessory's session news, (epoch, sequence) as commands:
/// the engine's epoch (the slot's, in a cluster) and a sequence that keeps increasing across restarts.
///
/// It decides; the engine tells it, after each transition, where each accessory it touched stands
/// (``update(_:host:otherwise:at:)``) and what the hosts report (``hostReported(_:headTracking:at:)``), and passes its
/// events on in its ``RoutingOutput``. Empty for an accessory without `.headTracking`, which costs nothing.
struct HeadTrackingStateMachine: Sendable {
    /// What makes session ids unguessable.
    let key: SessionKey
    /// The engine's epoch, carried by every event.
    let epoch: UInt64
    /// The sessions in force, by accessory.
    private(set) var sessions: [AccessoryID: HeadTrackingSession] = [:]
    /// The hosts whose Head Tracking setting is on, as they last reported (absent: off, or never said).
    private var switchedOn: Set<BluetoothAddress> = []
    /// The last sequence of session news, where the next counts on from.
    private var sequence: UInt64

    init(key: SessionKey, epoch: UInt64, sequenceBase: UInt64) {
        self.key = key
        self.epoch = epoch
        sequence = sequenceBase
    }

    /// Whether any session is in force (a bridge without head-tracking accessories never has one).
    var isEmpty: Bool { sessions.isEmpty }

    /// The session of `accessory`, if any.
    func session(of accessory: AccessoryID) -> HeadTrackingSession? {
        sessions.isEmpty ? nil : sessions[accessory]
    }

    /// Whether `host` says its Head Tracking setting is on.
    func isOn(_ host: BluetoothAddress) -> Bool {
        switchedOn.contains(host)
    }

    // MARK: - Events

    /// Where `accessory` stands after a change: `host`, the playing device routed to it while it is eligible for a
    /// session (registered with `.headTracking`, taking part, worn), or `nil`, with the `reason` a session it has
    /// ends for then. A session moves (invalidated, then activated with the new host) when the host changed.
    mutating func update(
        _ accessory: AccessoryID, host: BluetoothAddress?, otherwise reason: HeadTrackingEvent.Reason, at now: Timestamp
    ) -> [HeadTrackingEvent] {
        let current = sessions[accessory]
        if let current, let host, current.host == host {
            // A session taken back from a state older than its host's setting (a restart between the two) hears of
            // it now; otherwise nothing changed.
            let on = switchedOn.contains(host)
            return current.isHeadTrackingActive == on ? [] : [changeState(of: current, to: on, at: now)]
        }
        guard current?.host != host else { return [] }
        var events: [HeadTrackingEvent] = []
        if let current {
            events.append(invalidate(current, reason: host == nil ? reason : .routeMoved, at: now))
        }
        if let host {
            let order = next()
            let session = HeadTrackingSession(
                accessory: accessory, id: key.id(for: accessory, at: order), host: host,
                isHeadTrackingActive: switchedOn.contains(host), order: order)
            sessions[accessory] = session
            events.append(HeadTrackingEvent(.activated, session, reason: .routed, at: now))
        }
        return events
    }

    /// A playing device reported its Head Tracking setting: a session it hosts hears of a change.
    mutating func hostReported(_ host: BluetoothAddress, headTracking on: Bool, at now: Timestamp)
        -> [HeadTrackingEvent]
    {
        guard switchedOn.contains(host) != on else { return [] }
        if on { switchedOn.insert(host) } else { switchedOn.remove(host) }
        guard !sessions.isEmpty else { return [] }
        var events: [HeadTrackingEvent] = []
        for (_, session) in sessions.sorted(by: { $0.key < $1.key }) where session.host == host {
            events.append(changeState(of: session, to: on, at: now))
        }
        return events
    }

    /// The bridge shuts down (a single bridge: nobody takes its sessions over): every session ends.
    mutating func shutdown(at now: Timestamp) -> [HeadTrackingEvent] {
        sessions.values.sorted { $0.accessory < $1.accessory }.map { invalidate($0, reason: .shutdown, at: now) }
    }

    // MARK: - Restoring

    /// Takes back a session an accessory's retained state names (after a restart, or a slot's takeover): kept as it
    /// is, with its id, when the route it follows is still in force; the engine checks that after restoring.
    mutating func restore(_ session: HeadTrackingSession) {
        sessions[session.accessory] = session
        // News of this owner come after the restored session's, whatever its clock says.
        if session.order.epoch == epoch { sequence = max(sequence, session.order.sequence) }
    }

    /// Takes back a host's retained Head Tracking setting.
    mutating func restoreHost(_ host: BluetoothAddress, headTracking on: Bool) {
        if on { switchedOn.insert(host) } else { switchedOn.remove(host) }
    }

    // MARK: - Helpers

    /// `session`'s host's setting is now `on`: the session hears of it as a change of state.
    private mutating func changeState(of session: HeadTrackingSession, to on: Bool, at now: Timestamp)
        -> HeadTrackingEvent
    {
        var changed = session
        changed.isHeadTrackingActive = on
        changed.order = next()
        sessions[session.accessory] = changed
        return HeadTrackingEvent(.stateChanged, changed, reason: .switchChanged, at: now)
    }

    private mutating func invalidate(
        _ session: HeadTrackingSession, reason: HeadTrackingEvent.Reason, at now: Timestamp
    ) -> HeadTrackingEvent {
        sessions[session.accessory] = nil
        var ended = session
        ended.order = next()
        return HeadTrackingEvent(.invalidated, ended, reason: reason, at: now)
    }

    private mutating func next() -> CommandOrder {
        sequence += 1
        return CommandOrder(epoch: epoch, sequence: sequence)
    }
}
