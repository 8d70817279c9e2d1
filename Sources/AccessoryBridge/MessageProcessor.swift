import AccessoryModel
import AccessoryWire
import BridgeCore
import CoreMetrics
import DequeModule
import HomeAutomation
import Logging
import MQTTClient
import Synchronization

/// The bridge's I/O shell: reads each message (topic, payload format, payload), hands the event to the
/// ``BridgeStateMachine`` with the time, and publishes the actions it returns, with what home automation is owed
/// (``HomeAutomationStateMachine``). What to decide, and what waits for etcd in a cluster's slot, are the state
/// machines'; the processor decodes, runs actions, and reports what could not be sent.
///
/// Its files, by concern: this one (its state, and what the MQTT client calls: connection changes, wake-ups,
/// housekeeping), `MessageProcessor+Inbound.swift` (each message decoded into an event), `MessageProcessor+Actions.swift`
/// (running what the core decided) and `MessageProcessor+Restore.swift` (the retained states read at start-up).
///
/// One thread owns it: the MQTT client's network thread, which delivers messages, connection changes and wake-ups (see
/// ``MQTTClientHandler``) one at a time. Before it starts, the rebuild's task runs ``restore(_:)-(RetainedMessage)``
/// for each retained state, which the start-up reader's network thread decodes meanwhile (``decodeRetained(_:)``
/// reads no state). Nothing is locked, and nothing is published under a lock. The owner is checked where the state is
/// touched (``ThreadOwner``; in debug builds).
///
/// Bad input never changes state: it gets a clear result where the topic names an accessory, a log line with the
/// topic, and a counter.
///
/// ``AccessoryBridgeService`` runs one as its MQTT client's handler; it can also run against any ``MessagePublisher``
/// (tests, fuzzing, embedding), driven by ``handle(_:)`` and ``tick()``.
// @unchecked Sendable: every `var` below (`core`, `readerFormats`, `homeAutomation`, `requests`, `nextHousekeeping`,
// `connectedBefore`, `owner`, `receivedAt`, `heapTrimmer`, `announcing`, `restored`) is mutated without a lock, by one
// thread at a time: the rebuild's task (restore), then, once it ended, the network thread of the client this is the
// handler of
// (MQTTClient.start orders everything before it); or a test's or the fuzzer's single thread. `owner` checks it (debug
// builds). `decodeRetained` reads only `let` properties.
public final class MessageProcessor: MQTTClientHandler, @unchecked Sendable {
    var core: BridgeStateMachine
    /// Where its topics live (one bridge: all under the configured root; a cluster's slot: see ``ServedSlot``).
    let roots: TopicRoots
    /// The hubs' and accessories' topic root.
    var root: TopicRoot { roots.root }
    let codec: WireCodec
    let clock: WallClock
    let logger: Logger
    let metrics: BridgeMetrics
    let outbox: Outbox
    /// The format each hub and playing device reads what is sent to it in.
    var readerFormats: ReaderFormats
    /// Published on every (re)connection: the bridge's retained online status (and its availability for home
    /// automation, when the receiving session's will says offline).
    private let onlineStatus: [MQTTMessage]
    /// What home automation reads (views, events, availability, Home Assistant discovery); `nil` when turned off.
    var homeAutomation: HomeAutomationStateMachine?
    /// The requests handed to the core and not answered yet, oldest first: the core answers each exactly once, in
    /// the order they came (``BridgeStateMachine/telemetry(_:sequence:from:about:at:)``).
    var requests = Deque<Request>()
    /// When the gauges (and the bridge's view for home automation) are next refreshed, and how often (`nil`: only
    /// when ``housekeeping()`` is called).
    private var nextHousekeeping: Timestamp?
    private let housekeepingInterval: Duration?
    private var connectedBefore = false
    /// The thread that handles messages once the client runs (checked in debug builds).
    var owner = ThreadOwner()
    /// When the inbound message being handled arrived (for the histograms); `nil` between messages.
    var receivedAt: ContinuousClock.Instant?
    var heapTrimmer = HeapTrimmer()
    /// Since when, and how many accessories, home automation is being announced to (for the log line at its end).
    private var announcing: (since: ContinuousClock.Instant, accessories: Int)?
    /// In a cluster, where the slot's shared devices are settled with etcd (docs/scale-out.md).
    let sharedDevices: SharedDeviceLink?
    /// What restoring took back, and what it could not use.
    var restored = Restored()
    /// A graceful shutdown's request to end the head-tracking sessions, from the service's task to the network thread.
    public let shutdown = ShutdownRequest()

    /// - Parameter slot: in a cluster, the slot served (its topics, its hubs, its epoch); `nil` for one bridge.
    public init(
        configuration: BridgeConfiguration, instanceID: String, publisher: any MessagePublisher, clock: WallClock,
        logger: Logger, metrics factory: any MetricsFactory, onlineStatus: [MQTTMessage] = [], slot: ServedSlot? = nil,
        sharedDevices: SharedDeviceLink? = nil
    ) {
        self.sharedDevices = sharedDevices
        let roots = TopicRoots(configuration.topicRoot, slot: slot)
        self.roots = roots
        codec = WireCodec(maximumPayloadSize: configuration.maximumPayloadSize)
        self.clock = clock
        self.logger = logger
        let metrics = BridgeMetrics(factory: factory)
        self.metrics = metrics
        self.onlineStatus = onlineStatus
        housekeepingInterval = configuration.statisticsInterval
        nextHousekeeping = configuration.statisticsInterval.map { _ in clock.now }
        outbox = Outbox(
            publisher: publisher, roots: roots, epoch: slot?.epoch ?? 0, codec: codec, metrics: metrics,
            logger: logger)
        readerFormats = ReaderFormats(defaultFormat: configuration.payloadFormat)
        if configuration.homeAutomation {
            homeAutomation = HomeAutomationStateMachine(
                root: roots.root, homeAssistantPrefix: configuration.homeAssistantPrefix,
                fleet: slot == nil ? nil : roots.sources,
                version: configuration.version)
        }
        // Command sequences start above the time in ms × 1000, so that they keep increasing across restarts.
        let base = UInt64(max(0, clock.now.unixMilliseconds)) * 1000
        // Head-tracking session ids are unguessable: a key of this run's, from the system's random generator.
        var random = SystemRandomNumberGenerator()
        core = BridgeStateMachine(
            policy: configuration.policy, instanceID: instanceID, commandSequenceBase: base, slot: slot?.slot,
            epoch: slot?.epoch ?? 0, sessionKey: SessionKey(using: &random))
    }

    /// The filter of the retained Home Assistant discovery configs that restoring reads (`nil`: no discovery).
    public var discoveryConfigFilter: String? { homeAutomation?.configFilter }

    /// In a cluster, the playing devices' state topics the slot reads once restored (one bridge: none; it reads them
    /// all through one filter).
    public var sourceSubscriptions: [String] {
        core.watchedSources.map { roots.name(.sourceState(source: $0)) }
    }

    // MARK: - MQTTClientHandler

    public func started() {
        owner.claim()
    }

    public func received(_ message: MQTTMessage) {
        handle(message)
    }

    public func event(_ event: MQTTEvent) {
        owner.check()
        switch event {
        case .connected(let sessionPresent):
            logger.info("connected to the broker", metadata: ["mqtt.session_present": "\(sessionPresent)"])
            metrics.brokerConnected.record(1)
            for message in onlineStatus { outbox.publish(message) }
            resumePublishing()
            if connectedBefore {
                metrics.reconnects.increment()
            } else if homeAutomation != nil {
                let (accessories, hubs) = (core.accessoryIDs, core.hubsOnline)
                publish(homeAutomation?.firstConnected(accessories: accessories, hubsOnline: hubs))
                announcingBegan(accessories.count)
            }
            connectedBefore = true
        case .queueDrained:
            outbox.overflow.drained(logger: logger)
            resumePublishing()
            publish(homeAutomation?.queueDrained { core.state(of: $0) })
        case .connectionRefused(let error):
            logger.error("the broker refused the connection", metadata: ["error": "\(error)"])
        case .disconnected(let error?):
            metrics.brokerConnected.record(0)
            logger.warning("lost the broker; reconnecting", metadata: ["error": "\(error)"])
        case .disconnected(nil):
            metrics.brokerConnected.record(0)
            logger.info("disconnected from the broker")
        case .subscriptionRefused(let filter, let error):
            logger.error("the broker refused a subscription", metadata: ["mqtt.filter": "\(filter)", "error": "\(error)"])
        }
    }

    public func timeUntilWake() -> Duration? {
        if sharedDevices?.hasEvents == true || shutdown.isRequested { return .zero }
        // Waiting for etcd: nothing comes due, nothing is announced; the link's post wakes the thread.
        if core.isHolding { return nil }
        // Home automation's announcements go a slice per turn of the network loop, between the messages it reads;
        // while the client's queue holds many, they wait for it to go down.
        if homeAutomation?.isAnnouncing == true {
            return outbox.publisher.pendingMessages < Self.announcementQueueLimit ? .zero : Self.announcementPause
        }
        // Called twice per turn of the network loop: no array.
        let next =
            switch (core.nextDeadline, nextHousekeeping) {
            case (let deadline?, let housekeeping?): min(deadline, housekeeping)
            case (let deadline, let housekeeping): deadline ?? housekeeping
            }
        return next.map { $0 - clock.now }
    }

    public func wake() {
        owner.check()
        if shutdown.isRequested { endSessions() }
        takeSharedDeviceEvents()
        tick()
        if let next = nextHousekeeping, let interval = housekeepingInterval, clock.now >= next {
            nextHousekeeping = clock.now + interval
            housekeeping()
        }
        if !core.isHolding, homeAutomation?.isAnnouncing == true,
            outbox.publisher.pendingMessages < Self.announcementQueueLimit
        {
            publish(homeAutomation?.nextSlice(budget: Self.announcementSlice) { core.state(of: $0) })
            if homeAutomation?.isAnnouncing == false, let announcing {
                self.announcing = nil
                logger.info(
                    "announced every accessory to home automation",
                    metadata: [
                        "accessories": "\(announcing.accessories)",
                        "announce_ms": "\((ContinuousClock.now - announcing.since).wholeMilliseconds)",
                    ])
            }
        }
    }

    func announcingBegan(_ accessories: Int) {
        if homeAutomation?.isAnnouncing == true { announcing = (ContinuousClock.now, accessories) }
    }

    /// Accessories announced to Home Assistant per turn of the network loop, and how many messages may wait in the
    /// client's queue (beyond its send window of 100) for another slice to go. An answer or a command waits behind
    /// what is queued before it: at most the window, the limit and a slice, about 160 messages (why these values:
    /// docs/performance-history.md, "Home Assistant's birth").
    static let announcementSlice = 32
    static let announcementQueueLimit = 32
    static let announcementPause = Duration.milliseconds(5)

    /// Refreshes the gauges and the bridge's view from the counts the core keeps, every statistics interval.
    /// Once quiet after a busy spell, it also gives free heap memory back to the system (``HeapTrimmer``).
    public func housekeeping() {
        let statistics = core.statistics()
        let hubsOnline = core.hubsOnline.count
        metrics.record(statistics, hubsOnline: hubsOnline, outboundQueueDepth: outbox.publisher.pendingMessages)
        publish(
            homeAutomation?.statistics(
                accessories: statistics.accessories, worn: statistics.worn, routed: statistics.routed,
                hubsOnline: hubsOnline))
        if heapTrimmer.intervalEnded() {
            let started = ContinuousClock.now
            HeapTrimmer.trim()
            logger.debug(
                "gave free heap memory back to the system",
                metadata: ["duration_ms": "\((ContinuousClock.now - started).wholeMilliseconds)"])
        }
    }

    /// A single bridge shuts down gracefully: its network thread ends every head-tracking session (rule 13; nobody
    /// takes them over), then ``shutdown``'s wait returns. A cluster's slot does not: another member takes it over with
    /// its sessions.
    private func endSessions() {
        guard shutdown.take() else { return }
        perform(core.shutDown(at: clock.now))
        shutdown.done()
    }

    /// The bridge stopped (its client is closed): its gauges are zeroed.
    public func stopped() {
        metrics.zeroGauges()
    }

    // MARK: - Time

    /// Runs what came due: diagnostics of accessories, the end of resume windows (nothing while the core waits for
    /// etcd: the deadlines wait with the rest).
    public func tick() {
        owner.check()
        perform(core.tick(at: clock.now))
    }
}

/// A graceful shutdown asks the processor's network thread to end its head-tracking sessions and waits until it did
/// (at most a moment: the connection may be gone).
public final class ShutdownRequest: Sendable {
    private struct State {
        var requested = false
        var taken = false
        var finished = false
    }

    private let state = Mutex(State())

    /// Whether a shutdown was asked for and the network thread has not taken it yet.
    var isRequested: Bool { state.withLock { $0.requested && !$0.taken } }

    /// Asks for it (any thread); `wake` makes the network thread look now.
    public func request(waking wake: () -> Void) {
        state.withLock { $0.requested = true }
        wake()
    }

    /// The network thread takes the request: `true` once.
    func take() -> Bool {
        state.withLock { state in
            guard state.requested, !state.taken else { return false }
            state.taken = true
            return true
        }
    }

    /// The network thread ran it.
    func done() {
        state.withLock { $0.finished = true }
    }

    /// Returns once the network thread ran it, or after `timeout`.
    public func wait(timeout: Duration) async {
        let deadline = ContinuousClock.now + timeout
        while !state.withLock({ $0.finished }), ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(5))
        }
    }
}
