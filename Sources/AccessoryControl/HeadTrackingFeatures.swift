import AccessoryModel
import AccessoryWire
import Dispatch
import MQTTClient
import Synchronization

/// A hub's head-tracking features (``AudioAccessoryHeadTracking``), one per accessory at most, and what the bridge
/// said of their sessions (a ``HeadTrackingFollower``, for every accessory of the hub, so that a feature attached
/// while a session is in force activates it at once).
///
/// News comes on the network thread; this decides under its lock what each handler hears, and hands the calls to
/// the feature's serial queue without waiting for them (also under the lock, so that the calls of two threads — the
/// network thread's news, another's attach — reach a queue in the order they were decided).
final class HeadTrackingFeatures: Sendable {
    typealias Handler = AudioAccessoryHeadTracking.Handler
    typealias Session = AudioAccessoryHeadTracking.Session

    /// One attached feature.
    struct Attachment: Sendable {
        let token: UInt64
        let accessory: PairedAccessory
        let factory: @Sendable () -> any Handler
        /// Where its handlers are called, one call at a time, in order: the accessory's, which every feature of the
        /// accessory shares (a replaced feature's last call comes before its successor's first).
        let queue: DispatchQueue
        let handlers: Handlers
    }

    /// The handlers of a feature's sessions, by session id. Touched only on the feature's queue; the lock makes it
    /// Sendable at no cost (never contended).
    final class Handlers: Sendable {
        let byID = Mutex<[HeadTrackingSessionID: any Handler]>([:])
    }

    struct State {
        var follower = HeadTrackingFollower()
        var attachments: [AccessoryID: Attachment] = [:]
        /// The session objects of the sessions in force of attached features.
        var sessions: [AccessoryID: Session] = [:]
        /// Each accessory's queue, made when a feature is first attached to it.
        var queues: [AccessoryID: DispatchQueue] = [:]
        var nextToken: UInt64 = 0
        var stopped = false
    }

    private let state = Mutex(State())
    private let hub: HubID
    /// Where frames go: the cluster's root (a playing device's topics are never under a slot's).
    private let sourcesRoot: TopicRoot
    private let publish: @Sendable (MQTTMessage) throws(MQTTError) -> Void

    init(hub: HubID, sourcesRoot: TopicRoot, publish: @escaping @Sendable (MQTTMessage) throws(MQTTError) -> Void) {
        self.hub = hub
        self.sourcesRoot = sourcesRoot
        self.publish = publish
    }

    // MARK: - News

    /// News of a session of one of this hub's accessories; returns what became of it.
    @discardableResult
    func receive(_ event: HeadTrackingEvent) -> HeadTrackingFollower.Outcome {
        state.withLock { state in
            let outcome = state.follower.receive(event, hub: hub)
            guard case .applied(let actions) = outcome, !state.stopped,
                let attachment = state.attachments[event.session.accessory]
            else { return outcome }
            for action in actions { run(action, for: attachment, in: &state) }
            return outcome
        }
    }

    // MARK: - Features

    /// Attaches a feature to `accessory` (replacing the one it had); a session in force is activated at once.
    func attach(_ accessory: PairedAccessory, factory: @escaping @Sendable () -> any Handler) -> UInt64 {
        state.withLock { state in
            state.nextToken += 1
            let queue = state.queues[accessory.id] ?? DispatchQueue(label: "AccessoryControl.headTracking.\(accessory.id)")
            state.queues[accessory.id] = queue
            let attachment = Attachment(
                token: state.nextToken, accessory: accessory, factory: factory, queue: queue, handlers: Handlers())
            guard !state.stopped else { return attachment.token }
            if let previous = state.attachments[accessory.id] { end(previous, in: &state) }
            state.attachments[accessory.id] = attachment
            if let current = state.follower.session(of: accessory.id) {
                run(.activate(current.session, hub: current.hub), for: attachment, in: &state)
            }
            return attachment.token
        }
    }

    /// Detaches the feature `token` of `accessory`, if it is still attached: its session is invalidated.
    func detach(_ accessory: AccessoryID, token: UInt64) {
        state.withLock { state in
            guard let attachment = state.attachments[accessory], attachment.token == token else { return }
            end(attachment, in: &state)
            state.attachments[accessory] = nil
        }
    }

    /// The session in force of the feature `token` of `accessory`.
    func session(of accessory: AccessoryID, token: UInt64) -> Session? {
        state.withLock { state in
            state.attachments[accessory]?.token == token ? state.sessions[accessory] : nil
        }
    }

    /// The hub stops: every session of an attached feature is invalidated, and the features are let go.
    func stop() {
        state.withLock { state in
            state.stopped = true
            for attachment in state.attachments.values.sorted(by: { $0.accessory.id < $1.accessory.id }) {
                end(attachment, in: &state)
            }
            state.attachments.removeAll()
        }
    }

    /// The hub moved to another root (``AccessoryHub/Options/followsLayout``): every session of an attached feature
    /// is invalidated, and what the old root's bridge said is forgotten (another slot's orders are not comparable);
    /// the features stay, for the sessions the new root's bridge starts. Returns how many sessions ended.
    @discardableResult
    func moved() -> Int {
        state.withLock { state in
            let ending = state.attachments.values.filter { state.sessions[$0.accessory.id] != nil }
            for attachment in ending.sorted(by: { $0.accessory.id < $1.accessory.id }) { end(attachment, in: &state) }
            state.follower = HeadTrackingFollower()
            return ending.count
        }
    }

    // MARK: - Calling the handlers

    private func run(_ action: HeadTrackingFollower.Action, for attachment: Attachment, in state: inout State) {
        let handlers = attachment.handlers
        switch action {
        case .activate(let news, _):
            let session = Session(
                news, accessory: attachment.accessory, hub: hub, root: sourcesRoot, publish: publish)
            state.sessions[news.accessory] = session
            let factory = attachment.factory
            attachment.queue.async {
                let handler = factory()
                handlers.byID.withLock { $0[news.id] = handler }
                handler.activate(for: session)
            }
        case .changeState(let news):
            guard let session = state.sessions[news.accessory], session.id == news.id,
                session.setHeadTrackingActive(news.isHeadTrackingActive)
            else { return }
            let on = news.isHeadTrackingActive
            attachment.queue.async {
                handlers.byID.withLock { $0[news.id] }?.headTrackingStateDidChange(isActive: on)
            }
        case .invalidate(let news, _):
            guard state.sessions[news.accessory]?.id == news.id else { return }
            end(attachment, in: &state)
        }
    }

    /// Ends the session in force of `attachment`, if any: nothing more may be sent in it, and its handler's
    /// `invalidate()` is its last call.
    private func end(_ attachment: Attachment, in state: inout State) {
        guard let session = state.sessions.removeValue(forKey: attachment.accessory.id) else { return }
        session.end()
        let (handlers, id) = (attachment.handlers, session.id)
        attachment.queue.async {
            handlers.byID.withLock { $0.removeValue(forKey: id) }?.invalidate()
        }
    }
}
