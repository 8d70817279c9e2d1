import Synchronization

/// A client with a publishing session (``MQTTClient/init(configuration:publishingSession:logger:)``) is two
/// ``ClientCore``s: the receiving one, which the handler belongs to, and the publishing one, whose events it relays
/// to the receiving one's network thread. The receiving one reads only while the publishing one's queue has room.
extension ClientCore {
    enum Session {
        case receiving
        case publishing
    }

    // MARK: Events

    /// On the publishing session's thread: hands `event` to the receiving session's.
    func relay(_ event: MQTTEvent) {
        relayed.withLock { $0.append(event) }
        wakePipe.signal()
    }

    /// On the receiving session's thread: the handler hears what the publishing session relayed.
    func deliverRelayedEvents() {
        let events = relayed.withLock { relayed in
            defer { relayed.removeAll() }
            return relayed
        }
        for event in events { sessionEvent(event, from: .publishing) }
    }

    /// On the receiving session's thread: the handler hears of one connection, up once both sessions are and down
    /// when either goes (a session that comes back alone makes it up again).
    func sessionEvent(_ event: MQTTEvent, from session: Session) {
        switch event {
        case .connected(let sessionPresent):
            let wasUp = loop.receivingUp && loop.publishingUp
            switch session {
            case .receiving:
                loop.receivingUp = true
                loop.sessionPresent = sessionPresent
            case .publishing:
                loop.publishingUp = true
            }
            if !wasUp, loop.receivingUp, loop.publishingUp {
                loop.handler?.event(.connected(sessionPresent: loop.sessionPresent))
            }
        case .disconnected(let error):
            let wasUp = loop.receivingUp && loop.publishingUp
            switch session {
            case .receiving: loop.receivingUp = false
            case .publishing: loop.publishingUp = false
            }
            if wasUp { loop.handler?.event(.disconnected(error)) }
        case .connectionRefused, .subscriptionRefused, .queueDrained:
            loop.handler?.event(event)
        }
    }

    // MARK: Pushing back

    /// On the receiving session's thread, before reading a packet: whether it may. Always without a publishing
    /// session. With one: not while more than half of its queue's bound waits, until a quarter does (its
    /// ``publishingQueueShrank(to:)`` says when); meanwhile one packet every half keep-alive, so that the broker and
    /// libmosquitto keep the connection (both close it after a keep-alive and a half without a packet).
    func mayRead() -> Bool {
        guard let publishing else { return true }
        let limit = publishing.configuration.maximumPendingMessages
        if let pausedSince = loop.pausedSince {
            if !readingPaused.load(ordering: .acquiring) {
                loop.pausedSince = nil
                logger.debug(
                    "MQTT reading resumed",
                    metadata: ["mqtt.paused_ms": "\((ContinuousClock.now - pausedSince).wholeMillisecondsRoundedDown)"])
                return true
            }
            guard ContinuousClock.now - pausedSince >= configuration.keepAlive / 2 else { return false }
            loop.pausedSince = .now
            return true
        }
        guard publishing.waiting.load(ordering: .relaxed) > limit / 2 else { return true }
        readingPaused.store(true, ordering: .releasing)
        // The queue may have shrunk since: the publishing session only clears a flag that is set.
        if publishing.waiting.load(ordering: .relaxed) <= limit / 4 {
            readingPaused.store(false, ordering: .releasing)
            return true
        }
        loop.pausedSince = .now
        logger.debug(
            "MQTT reading paused: the publishing session's queue is past half its bound",
            metadata: ["mqtt.waiting": "\(publishing.waiting.load(ordering: .relaxed))"])
        return false
    }

    /// On the publishing session's thread, after it handed waiting messages on: wakes a paused receiving session once
    /// at most a quarter of the bound waits.
    func publishingQueueShrank(to waiting: Int) {
        guard let publishing, waiting <= publishing.configuration.maximumPendingMessages / 4,
            readingPaused.compareExchange(expected: true, desired: false, ordering: .acquiringAndReleasing).exchanged
        else { return }
        wakePipe.signal()
    }
}
