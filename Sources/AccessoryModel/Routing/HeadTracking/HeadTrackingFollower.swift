/// The receiving end of rule 13, as a hub or a host keeps it: the bridge's news of head-tracking sessions, taken in
/// order, and the session each accessory has now. It decides; AccessoryControl's hub calls the handlers and its host
/// feeds the sensor updates from what it returns.
///
/// Per accessory it keeps the order, (epoch, sequence), of the last news it took, and drops news that is not newer:
/// a repeat, or an older owner's (cut off since) in a cluster. Newer news says how the accessory stands at its order,
/// whatever came before it was missed: an activation replaces the session in force (which ends), a change of state of
/// a session not known yet makes it the session in force, and an invalidation ends whatever session was in force.
public struct HeadTrackingFollower: Sendable {
    /// A session in force, and the hub its accessory belongs to (the only one whose frames count for it).
    public struct Current: Hashable, Sendable {
        public var session: HeadTrackingSession
        public var hub: HubID?

        public init(session: HeadTrackingSession, hub: HubID?) {
            self.session = session
            self.hub = hub
        }
    }

    /// What to tell the handler of a session (AudioAccessoryKit's `AudioAccessoryHeadTracking.Handler`).
    public enum Action: Hashable, Sendable {
        /// The session is established: `activate(for:)`.
        case activate(HeadTrackingSession, hub: HubID?)
        /// The person's setting on its host changed: `headTrackingStateDidChange(isActive:)`.
        case changeState(HeadTrackingSession)
        /// It ended: `invalidate()`. Nothing more may be sent in it.
        case invalidate(HeadTrackingSession, reason: HeadTrackingEvent.Reason)
    }

    /// What became of a piece of news.
    public enum Outcome: Hashable, Sendable {
        /// Taken: the actions it calls for (none when it changes nothing a handler hears of).
        case applied([Action])
        /// Dropped: not newer than the last news taken for its accessory.
        case stale(last: CommandOrder)
        /// Dropped: a host's follower got news of a session another device hosts.
        case otherHost
    }

    /// What a frame is to the sessions in force.
    public enum FrameVerdict: String, Hashable, Sendable, CaseIterable {
        /// A frame of the accessory's session in force, from its hub: render it.
        case current
        /// The accessory has no session in force.
        case noSession
        /// A frame of another session (an ended one, or one never told).
        case otherSession
        /// A frame from a hub other than the one the accessory belongs to (or the news named none).
        case otherHub
    }

    /// The host this follower takes news for; `nil` for a hub, which takes news of sessions on any host.
    public let host: BluetoothAddress?
    /// The order of the last news taken, by accessory.
    private var last: [AccessoryID: CommandOrder] = [:]
    /// The sessions in force, by accessory.
    public private(set) var sessions: [AccessoryID: Current] = [:]

    public init(host: BluetoothAddress? = nil) {
        self.host = host
    }

    /// The session in force of `accessory`, if any.
    public func session(of accessory: AccessoryID) -> Current? {
        sessions[accessory]
    }

    /// Takes a piece of news: `event` about a session of the accessory of hub `hub` (as the news names it).
    public mutating func receive(_ event: HeadTrackingEvent, hub: HubID?) -> Outcome {
        let news = event.session
        if let host, news.host != host { return .otherHost }
        if let previous = last[news.accessory], news.order <= previous { return .stale(last: previous) }
        last[news.accessory] = news.order
        let current = sessions[news.accessory]
        switch event.kind {
        case .activated, .stateChanged:
            if let current, current.session.id == news.id {
                sessions[news.accessory] = Current(session: news, hub: hub ?? current.hub)
                return .applied(
                    current.session.isHeadTrackingActive == news.isHeadTrackingActive ? [] : [.changeState(news)])
            }
            sessions[news.accessory] = Current(session: news, hub: hub)
            var actions: [Action] = []
            if let current { actions.append(.invalidate(current.session, reason: .routeMoved)) }
            actions.append(.activate(news, hub: hub))
            return .applied(actions)
        case .invalidated:
            guard let current else { return .applied([]) }
            sessions[news.accessory] = nil
            // The session as it ended; one whose end was missed ends as replaced.
            return .applied(
                current.session.id == news.id
                    ? [.invalidate(news, reason: event.reason)] : [.invalidate(current.session, reason: .routeMoved)])
        }
    }

    /// What a frame of `session`, from hub `hub` on the topic of `accessory`, is to the sessions in force.
    public func frame(of session: HeadTrackingSessionID, from hub: HubID, for accessory: AccessoryID) -> FrameVerdict {
        guard let current = sessions[accessory] else { return .noSession }
        guard current.session.id == session else { return .otherSession }
        // News that names no hub lets no hub's frames through.
        guard current.hub == hub else { return .otherHub }
        return .current
    }

    /// Every session in force ends (the hub or host stops): their invalidations, in order of accessory. The orders
    /// taken stay, so that news from before the stop is still dropped.
    public mutating func endAll(reason: HeadTrackingEvent.Reason) -> [Action] {
        let ended = sessions.values.sorted { $0.session.accessory < $1.session.accessory }
        sessions.removeAll()
        return ended.map { .invalidate($0.session, reason: reason) }
    }
}
