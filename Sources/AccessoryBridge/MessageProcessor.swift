import AccessoryModel
import AccessoryWire
import BridgeCore
import CoreMetrics
import HomeAutomation
import Logging
import MQTTClient


/// The bridge's I/O shell: reads each message (topic, payload format, payload), hands the event to the
/// ``BridgeStateMachine`` with the time, and publishes the actions it returns, with what home automation is owed
/// (``HomeAutomationStateMachine``). It decides nothing itself.
///
/// One thread owns it: the MQTT client's network thread, which delivers messages, connection changes and wake-ups (see
/// ``MQTTClientHandler``) one at a time. Before it starts, the rebuild's task runs ``restore(_:)-(RetainedMessage)``
/// for each retained state, which the start-up reader's network thread decodes meanwhile (``decodeRetained(_:)``
/// reads no state). Nothing is locked, and nothing is published under a lock. The owner is checked where the state is
/// touched (``Owner``; in debug builds).
///
/// Bad input never changes state: it gets a clear result where the topic names an accessory, a log line with the
/// topic, and a counter.
///
/// ``AccessoryBridgeService`` runs one as its MQTT client's handler; it can also run against any ``MessagePublisher``
/// (tests, fuzzing, embedding), driven by ``handle(_:)`` and ``tick()``.
// @unchecked Sendable: every `var` below (the state machines, the housekeeping schedule, what was restored, the time
// the message being handled arrived, the heap trimmer) is mutated without a lock, by one thread at a time: the
// rebuild's task (restore), then, once it ended, the network thread of the client this is the handler of
// (MQTTClient.start orders everything before it); or a test's or the fuzzer's single thread. `owner` checks it (debug
// builds). `decodeRetained` reads only `let` properties.
public final class MessageProcessor: MQTTClientHandler, @unchecked Sendable {
    private var core: BridgeStateMachine
    /// Where its topics live (one bridge: all under the configured root; a cluster's slot: see ``ServedSlot``).
    private let roots: TopicRoots
    /// The hubs' and accessories' topic root.
    private var root: TopicRoot { roots.root }
    private let codec: WireCodec
    private let defaultFormat: PayloadFormat
    private let clock: WallClock
    private let logger: Logger
    private let metrics: BridgeMetrics
    private let outbox: Outbox
    /// Published on every (re)connection: the bridge's retained online status.
    private let onlineStatus: MQTTMessage?
    /// What home automation reads (views, events, availability, Home Assistant discovery); `nil` when turned off.
    private var homeAutomation: HomeAutomationStateMachine?
    /// When the gauges (and the bridge's view for home automation) are next refreshed, and how often (`nil`: only
    /// when ``housekeeping()`` is called).
    private var nextHousekeeping: Timestamp?
    private let housekeepingInterval: Duration?
    private var connectedBefore = false
    /// The thread that handles messages once the client runs (checked in debug builds).
    private var owner = Owner()
    /// When the inbound message being handled arrived (for the histograms); `nil` between messages.
    private var receivedAt: ContinuousClock.Instant?
    private var heapTrimmer = HeapTrimmer()
    /// Since when, and how many accessories, home automation is being announced to (for the log line at its end).
    private var announcing: (since: ContinuousClock.Instant, accessories: Int)?
    /// In a cluster, where the slot's shared devices are settled with etcd (docs/scale-out.md).
    private let sharedDevices: SharedDeviceLink?
    /// In a cluster, the devices the slot lists now whose listing etcd has not confirmed yet. Until it has, nothing
    /// the slot would do next goes out: whoever takes the slot over reads its listings from the retained states, and
    /// must find them in etcd too (or two slots could route a device each thinks its own).
    private var awaitedListings: Set<BluetoothAddress> = []
    /// What waits for them, in the order it came: the rest of the actions being run (decided already), then what is
    /// decided only when it is its turn (messages, etcd's news, publishing resumed), so that what goes out is in the
    /// order it was decided.
    private var deferred: [Deferred] = []

    private enum Deferred {
        case actions([BridgeAction], Request?)
        case message(MQTTMessage)
        case sharedDevice(SharedDeviceEvent)
        case publishingResumed
    }

    /// Whether what comes now must wait behind what waits for etcd.
    private var waiting: Bool { !awaitedListings.isEmpty || !deferred.isEmpty }

    /// - Parameter slot: in a cluster, the slot served (its topics, its hubs, its epoch); `nil` for one bridge.
    public init(
        configuration: BridgeConfiguration, instanceID: String, publisher: any MessagePublisher, clock: WallClock,
        logger: Logger, metrics factory: any MetricsFactory, onlineStatus: MQTTMessage? = nil, slot: ServedSlot? = nil,
        sharedDevices: SharedDeviceLink? = nil
    ) {
        self.sharedDevices = sharedDevices
        let roots = TopicRoots(configuration.topicRoot, slot: slot)
        self.roots = roots
        codec = WireCodec(maximumPayloadSize: configuration.maximumPayloadSize)
        defaultFormat = configuration.payloadFormat
        self.clock = clock
        self.logger = logger
        let metrics = BridgeMetrics(factory: factory, slot: slot?.slot.number)
        self.metrics = metrics
        self.onlineStatus = onlineStatus
        housekeepingInterval = configuration.statisticsInterval
        nextHousekeeping = configuration.statisticsInterval.map { _ in clock.now }
        outbox = Outbox(
            publisher: publisher, roots: roots, epoch: slot?.epoch ?? 0, codec: codec,
            defaultFormat: configuration.payloadFormat,
            metrics: metrics, logger: logger)
        if configuration.homeAutomation {
            homeAutomation = HomeAutomationStateMachine(
                root: roots.root, homeAssistantPrefix: configuration.homeAssistantPrefix, grouped: slot != nil,
                version: configuration.version)
        }
        // Command sequences start above the time in ms × 1000, so that they keep increasing across restarts.
        let base = UInt64(max(0, clock.now.unixMilliseconds)) * 1000
        core = BridgeStateMachine(
            policy: configuration.policy, instanceID: instanceID, commandSequenceBase: base, slot: slot?.slot,
            epoch: slot?.epoch ?? 0)
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
            if let onlineStatus { outbox.publish(onlineStatus) }
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
        if sharedDevices?.hasEvents == true { return .zero }
        // Waiting for etcd: the link's post wakes the thread.
        if waiting { return nil }
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
        takeSharedDeviceEvents()
        // Deadlines decide too: they wait with the rest while etcd has not confirmed a listing.
        if !waiting { tick() }
        if let next = nextHousekeeping, let interval = housekeepingInterval, clock.now >= next {
            nextHousekeeping = clock.now + interval
            housekeeping()
        }
        if homeAutomation?.isAnnouncing == true, outbox.publisher.pendingMessages < Self.announcementQueueLimit {
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

    private func announcingBegan(_ accessories: Int) {
        if homeAutomation?.isAnnouncing == true { announcing = (ContinuousClock.now, accessories) }
    }

    /// Accessories announced to Home Assistant per turn of the network loop, and how many messages may wait in the
    /// client's queue (beyond its send window of 100) for another slice to go. An answer or a command waits behind
    /// what is queued before it: at most the window, the limit and a slice, about 160 messages, some 30 ms at the
    /// 5,000 configs/s a bridge announces at (`make bench-announce`: with 1,000 queued, telemetry's p99 was 187 ms
    /// while announcing a million accessories). The queue drains for longer than the pause, so the link never idles.
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
                metadata: ["duration_ms": "\((ContinuousClock.now - started).nanoseconds / 1_000_000)"])
        }
    }

    /// The bridge stopped (its client is closed): its gauges are zeroed.
    public func stopped() {
        metrics.zeroGauges()
    }

    // MARK: - Inbound

    /// Handles one inbound message.
    public func handle(_ message: MQTTMessage) {
        owner.check()
        // What etcd said about shared devices comes first: a message must meet the routes as they stand.
        takeSharedDeviceEvents()
        guard !waiting else {
            deferred.append(.message(message))
            return
        }
        process(message)
    }

    private func process(_ message: MQTTMessage) {
        let receivedAt = ContinuousClock.now
        self.receivedAt = receivedAt
        heapTrimmer.busy()
        defer {
            self.receivedAt = nil
            metrics.handling.recordNanoseconds((ContinuousClock.now - receivedAt).nanoseconds)
        }
        if homeAutomation?.isHomeAssistantStatus(message.topic) == true {
            // Home Assistant (re)started ("online"): it needs every device again.
            let (accessories, hubs) = (core.accessoryIDs, core.hubsOnline)
            publish(homeAutomation?.homeAssistantStatus(message.payload, accessories: accessories, hubsOnline: hubs))
            announcingBegan(accessories.count)
            return
        }
        let topic: Topic
        do {
            topic = try roots.parse(message.topic)
        } catch {
            metrics.refused[.topic]?.increment()
            logger.warning(
                "refused a message on a topic outside the contract",
                metadata: ["mqtt.topic": "\(message.topic)", "reason": "\(error.reason)"])
            return
        }
        switch topic {
        case .telemetry(let hub, let accessory):
            metrics.received["telemetry"]?.increment()
            if core.refusal(of: hub) != nil { metrics.refused[.slot]?.increment() }
            telemetry(message, hub: hub, accessory: accessory)
        case .hubStatus(let hub):
            metrics.received["hub_status"]?.increment()
            hubStatus(message, hub: hub)
        case .sourceState(let source):
            metrics.received["source_state"]?.increment()
            sourceState(message, source: source)
        case .controls(let accessory):
            metrics.received["controls"]?.increment()
            controls(message, accessory: accessory)
        case .result, .rebirth, .responses, .accessoryState, .sourceCommands, .bridgeStatus, .controlsResult,
            .accessoryView, .accessoryEvents, .hubAvailability, .bridgeAvailability, .bridgeView:
            logger.debug("ignored a message the bridge does not consume", metadata: ["mqtt.topic": "\(message.topic)"])
        }
    }

    private func telemetry(_ message: MQTTMessage, hub: HubID, accessory id: AccessoryID) {
        // Whatever is wrong with the message, the core answers it: it alone knows what this hub may see.
        let responseTopic = ResponseTopic(message.properties.responseTopic, of: hub, under: root)
        if case .refused(let refused) = responseTopic {
            metrics.refusedResponseTopics.increment()
            logger.warning(
                "refused a response topic outside the hub's own",
                metadata: [
                    "mqtt.response_topic": "\(refused)", "hub.id": "\(hub)",
                    "allowed": "\(Topic.Kind.responses.filter(under: root, hub: hub))",
                ])
        }
        var request = Request(
            message: message, replyTo: .hub(hub, responseTopic: responseTopic), accessory: id, format: defaultFormat)
        let telemetry: InboundTelemetry
        do {
            request.format = try PayloadFormat.detect(
                contentType: message.properties.contentType, payload: message.payload)
            telemetry = try codec.readTelemetry(from: message.payload, format: request.format, for: id)
            if case .failure(let error) = telemetry.request {
                refuse(message, .value, error.reason)
            }
        } catch {
            refuse(message, Self.refusal(error), error.reason)
            telemetry = InboundTelemetry(
                sequence: 0, requestID: "", request: .failure(.invalidRequest(reason: error.reason)))
        }
        request.requestID = telemetry.requestID
        request.sequence = telemetry.sequence
        let actions = core.telemetry(
            telemetry.request, sequence: telemetry.sequence, from: hub, about: id, at: clock.now)
        run(actions, replyingTo: request)
    }

    private func controls(_ message: MQTTMessage, accessory id: AccessoryID) {
        var request = Request(message: message, replyTo: .controls, accessory: id, format: defaultFormat)
        let controls: Result<AccessoryControls, AccessoryControlError>
        do {
            request.format = try format(of: message)
            let decoded = try codec.decode(ControlsRequest.self, from: message.payload, format: request.format)
            request.requestID = decoded.requestID
            controls = .success(decoded.controls)
        } catch {
            refuse(message, Self.refusal(error), error.reason)
            controls = .failure(.invalidRequest(reason: error.reason))
        }
        run(core.controls(controls, for: id, at: clock.now), replyingTo: request)
    }

    private func hubStatus(_ message: MQTTMessage, hub: HubID) {
        if let refusal = core.refusal(of: hub) {
            refuse(message, .slot, refusal.reason)
            return
        }
        // An empty payload is a HubStatus with every field at its default: offline (which is also what clearing a
        // hub's retained status should mean).
        let status: HubStatus
        do {
            status = try codec.decode(HubStatus.self, from: message.payload, format: format(of: message))
        } catch {
            refuse(message, Self.refusal(error), error.reason)
            return
        }
        logger.info("hub status", metadata: ["hub.id": "\(hub)", "online": "\(status.online)"])
        run(core.hubStatus(hub, online: status.online, at: clock.now), replyingTo: nil)
        publish(homeAutomation?.hubStatus(hub, online: status.online))
    }

    private func sourceState(_ message: MQTTMessage, source: BluetoothAddress) {
        // An empty payload is a SourceState that says nothing (no activity, no route): it changes nothing.
        let report: SourceReport
        do {
            report = try codec.decode(SourceReport.self, from: message.payload, format: format(of: message))
        } catch {
            refuse(message, Self.refusal(error), error.reason)
            return
        }
        run(core.sourceReported(report, from: source, at: clock.now), replyingTo: nil)
    }

    /// In a cluster, runs what etcd said about the slot's shared devices since the last time.
    public func takeSharedDeviceEvents() {
        guard let events = sharedDevices?.take(), !events.isEmpty else { return }
        for event in events {
            // The answer to a listing ends the wait for it; the event itself takes its turn.
            if case .listed(let source, _) = event { awaitedListings.remove(source) }
            if waiting {
                deferred.append(.sharedDevice(event))
            } else {
                run(core.sharedDevice(event, at: clock.now), replyingTo: nil)
            }
        }
        replayDeferred()
    }

    /// Once etcd confirmed every listing, runs what waited for it, in order; stops again at a new listing (what that
    /// one holds back comes before what still waits).
    private func replayDeferred() {
        guard awaitedListings.isEmpty, !deferred.isEmpty else { return }
        var queue = deferred[...]
        deferred = []
        while let next = queue.popFirst() {
            switch next {
            case .actions(let actions, let request): run(actions, replyingTo: request)
            case .message(let message): process(message)
            case .sharedDevice(let event): run(core.sharedDevice(event, at: clock.now), replyingTo: nil)
            case .publishingResumed: resumePublishing()
            }
            if !awaitedListings.isEmpty {
                deferred += queue
                return
            }
        }
    }

    // MARK: - Time

    /// Runs what came due: diagnostics of accessories, the end of resume windows.
    public func tick() {
        owner.check()
        run(core.tick(at: clock.now), replyingTo: nil)
    }

    // MARK: - Restoring

    /// What restoring took back, and what it could not use.
    public struct Restored: Hashable, Sendable {
        /// The accessories the bridge holds once restored: a state read twice (a reader that reconnected, say)
        /// counts once.
        public var accessories = 0
        /// The source states read.
        public var sources = 0
        /// The retained messages that could not be used.
        public var skipped = 0
        /// This bridge's (or slot's) Home Assistant discovery configs read back.
        public var configs = 0
    }

    private var restored = Restored()

    /// A retained message read at start-up: decoded by ``decodeRetained(_:)``, taken back by
    /// ``restore(_:)-(RetainedMessage)``.
    public struct RetainedMessage: Sendable {
        enum Content: Sendable {
            case accessory(AccessoryState)
            case source(SourceReport, BluetoothAddress)
            /// Neither: one of home automation's, or unusable.
            case other(MQTTMessage)
        }

        let content: Content
    }

    /// Decodes one retained accessory or source state. It reads the processor's configuration only, never its state:
    /// the start-up reader's network thread runs it while the task that owns the processor takes back the states
    /// decoded before (see ``RetainedStates``).
    public func decodeRetained(_ message: MQTTMessage) -> RetainedMessage {
        switch try? roots.parse(message.topic) {
        case .sourceState(let source)?:
            if let report = try? codec.decode(SourceReport.self, from: message.payload, format: format(of: message)) {
                return RetainedMessage(content: .source(report, source))
            }
        case .accessoryState(let id)?:
            if let state = try? codec.decode(
                AccessoryState.self, from: message.payload, format: format(of: message), at: clock.now),
                state.accessory.id == id
            {
                return RetainedMessage(content: .accessory(state))
            }
        default:
            break
        }
        return RetainedMessage(content: .other(message))
    }

    /// Takes back one retained accessory or source state, read before any telemetry (and before the client starts):
    /// publishes nothing, sends no command. The order of the states does not matter; call
    /// ``restoringFinished()`` once they are all in.
    public func restore(_ message: MQTTMessage) {
        restore(decodeRetained(message))
    }

    /// Takes back one decoded retained message (see ``restore(_:)-(MQTTMessage)``).
    public func restore(_ retained: RetainedMessage) {
        let now = clock.now
        switch retained.content {
        case .source(let report, let source):
            core.restoreSource(report, from: source, at: now)
            restored.sources += 1
        case .accessory(let state):
            core.restore(state, at: now)
        case .other(let message):
            if homeAutomation?.retainedMessageSeen(topic: message.topic, payload: message.payload) == true {
                restored.configs += 1
                return
            }
            restored.skipped += 1
            logger.warning("ignored an unusable retained state", metadata: ["mqtt.topic": "\(message.topic)"])
        }
    }

    /// Every retained state is in: returns how many of each were restored and how many were unusable.
    @discardableResult
    public func restoringFinished() -> Restored {
        core.restoringFinished()
        heapTrimmer.busy()
        restored.accessories = core.accessoryCount
        return restored
    }

    // MARK: - Running actions

    /// The request being answered: where its answer goes and in which format.
    private struct Request {
        enum ReplyTo {
            /// Telemetry: the hub's result topic (and the response topic the request named, when allowed).
            case hub(HubID, responseTopic: ResponseTopic)
            /// Controls: the accessory's controls result topic.
            case controls
        }

        var message: MQTTMessage
        var replyTo: ReplyTo
        var accessory: AccessoryID
        var format: PayloadFormat
        var requestID = ""
        var sequence: UInt64 = 0
    }

    /// What could not be published, now that publishing works again: the owed commands, then the states a batch at
    /// a time until the client's queue refuses one (its draining resumes the rest), so that what waits is bounded by
    /// that queue, not by the fleet.
    private func resumePublishing() {
        guard !waiting else {
            deferred.append(.publishingResumed)
            return
        }
        while run(core.publishingResumed(at: clock.now, statesAtMost: 1_000), replyingTo: nil),
            core.hasUnpublishedStates
        {}
    }

    /// Publishes each action in order; what cannot be published goes back to the core. Returns whether all of it
    /// could be published.
    @discardableResult
    private func run(_ actions: [BridgeAction], replyingTo request: Request?) -> Bool {
        var allSent = true
        for (index, action) in actions.enumerated() {
            if !awaitedListings.isEmpty, !action.changesListing {
                // Held back until etcd has the listings (see awaitedListings).
                deferred.append(.actions(Array(actions[index...]), request))
                return allSent
            }
            let sent: Bool
            switch action {
            case .sendCommand(let command):
                sent = outbox.publishCommand(command)
                if sent {
                    if let receivedAt { metrics.toCommand.recordNanoseconds((ContinuousClock.now - receivedAt).nanoseconds) }
                    publish(homeAutomation?.commandSent(command))
                }
            case .publishState(let state):
                sent = publishState(codec.encoded(state, as: defaultFormat))
            case .answer(let answer):
                guard let request else { continue }
                note(answer, of: request)
                // The state the request changed, in the request's format, and the answer embedding those bytes.
                var published: EncodedState?
                if answer.publishesState, let state = answer.state {
                    let encoded = codec.encoded(state, as: request.format)
                    published = encoded
                    if !publishState(encoded) {
                        core.notSent(.publishState(state))
                        allSent = false
                    }
                }
                switch request.replyTo {
                case .hub(let hub, let responseTopic):
                    sent = outbox.publishResult(
                        answer, hub: hub, accessory: request.accessory, requestID: request.requestID,
                        sequence: request.sequence, format: request.format, responseTopic: responseTopic,
                        correlationData: request.message.properties.correlationData, published: published)
                case .controls:
                    sent = outbox.publishControlsResult(
                        answer, accessory: request.accessory, requestID: request.requestID, format: request.format,
                        published: published)
                }
            case .requestRebirth(let rebirth):
                metrics.rebirthRequests.increment()
                logger.warning(
                    "gap in a hub's sequence",
                    metadata: [
                        "accessory.id": "\(rebirth.accessory)", "hub.id": "\(rebirth.hub)",
                        "last_sequence": "\(rebirth.lastSequence)", "sequence": "\(rebirth.receivedSequence)",
                    ])
                sent = outbox.publishRebirthRequest(rebirth)
            case .watchSource(let source):
                sent = watch(source, true)
                if let sharedDevices {
                    awaitedListings.insert(source)
                    sharedDevices.send(.listed(source))
                }
            case .unwatchSource(let source):
                sent = watch(source, false)
                sharedDevices?.send(.unlisted(source))
            case .noteWorn(let listing):
                sharedDevices?.send(.worn(listing))
                sent = true
            case .claimDevice(let claim):
                logger.debug("claiming a shared device", metadata: ["source.id": "\(claim.source)", "accessory.id": "\(claim.accessory)"])
                sharedDevices?.send(.claim(claim))
                sent = true
            case .releaseDevice(let release):
                sharedDevices?.send(.release(release))
                sent = true
            }
            if !sent {
                core.notSent(action)
                allSent = false
            }
        }
        return allSent
    }

    /// Publishes an accessory's retained state and what home automation is owed for it (its view, its config);
    /// returns whether all of it could be queued: if not, the state is published again later, with the rest.
    private func publishState(_ state: EncodedState) -> Bool {
        let stateSent = outbox.publishState(state)
        let automationSent = publish(homeAutomation?.stateChanged(state.state))
        return stateSent && automationSent
    }

    /// Publishes what home automation is owed; tells it what the client's queue refused. Returns whether all of it
    /// could be queued.
    @discardableResult
    private func publish(_ publications: [HomeAutomationStateMachine.Publication]?) -> Bool {
        var allSent = true
        for publication in publications ?? [] {
            guard !outbox.publish(json: publication.payload, to: publication.topic, retain: publication.retain) else {
                continue
            }
            homeAutomation?.notSent(publication)
            allSent = false
        }
        return allSent
    }

    /// Logs and counts what became of a request.
    private func note(_ answer: BridgeAction.Answer, of request: Request) {
        switch answer.result {
        case .applied:
            return
        case .failed(let error):
            var metadata: Logger.Metadata = [
                "mqtt.topic": "\(request.message.topic)", "accessory.id": "\(request.accessory)",
                "error": "\(error.code.rawValue)", "reason": "\(error.reason)",
            ]
            if case .hub(let hub, _) = request.replyTo { metadata["hub.id"] = "\(hub)" }
            logger.info("request failed", metadata: metadata)
        case .duplicate:
            metrics.duplicates.increment()
            logger.info(
                "duplicate telemetry",
                metadata: [
                    "mqtt.topic": "\(request.message.topic)", "accessory.id": "\(request.accessory)",
                    "sequence": "\(request.sequence)",
                ])
        }
    }

    // MARK: - Helpers

    /// Starts or stops reading a playing device's state (a cluster's slot reads those its accessories list).
    private func watch(_ source: BluetoothAddress, _ on: Bool) -> Bool {
        let topic = roots.name(.sourceState(source: source))
        do {
            if on { try outbox.publisher.subscribe(topic) } else { try outbox.publisher.unsubscribe(topic) }
        } catch {
            logger.error(
                on ? "could not subscribe to a playing device's state" : "could not unsubscribe",
                metadata: ["mqtt.filter": "\(topic)", "error": "\(error)"])
        }
        // Not connected now: the client remembers the subscription and sends it at the next connection. Refused
        // otherwise (an invalid filter, no memory): logged above, and not tried again.
        return true
    }

    /// The format a message's content type or first byte says.
    private func format(of message: MQTTMessage) throws(WireError) -> PayloadFormat {
        try PayloadFormat.detect(contentType: message.properties.contentType, payload: message.payload)
    }

    private func refuse(_ message: MQTTMessage, _ reason: BridgeMetrics.Refusal, _ explanation: String) {
        metrics.refused[reason]?.increment()
        logger.warning(
            "refused a message", metadata: ["mqtt.topic": "\(message.topic)", "reason": "\(explanation)"])
    }

    private static func refusal(_ error: WireError) -> BridgeMetrics.Refusal {
        switch error.kind {
        case .unsupportedContentType: .contentType
        case .tooLarge: .tooLarge
        case .malformedProtobuf: .protobuf
        case .malformedJSON: .json
        case .invalidValue: .value
        }
    }
}

extension BridgeAction {
    /// Whether it starts or ends a listing of a playing device (what a slot runs even while it waits for etcd).
    fileprivate var changesListing: Bool {
        switch self {
        case .watchSource, .unwatchSource: true
        default: false
        }
    }
}
