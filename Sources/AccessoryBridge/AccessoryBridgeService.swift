import AccessoryModel
import AccessoryWire
import CoreMetrics
import HomeAutomation
import Logging
import MQTTClient
import ServiceLifecycle
import Synchronization

/// The bridge as a `Service`: connects to the broker, subscribes to telemetry, hub statuses and source states, and
/// hands every message, connection change and deadline to its ``MessageProcessor`` on the client's network thread,
/// which owns all of the bridge's state. It announces itself with a retained BridgeStatus (online on every
/// connection; offline by its will and on graceful shutdown).
///
/// In a cluster, one serves each slot its instance owns (``ServedSlot``; docs/scale-out.md), started and stopped by
/// the cluster's service: its session connects first, reading nothing (which cuts an old owner off), then the slot is
/// rebuilt from its own retained states and the playing devices its accessories list, then it reads.
public final class AccessoryBridgeService: Service {
    private let configuration: BridgeConfiguration
    private let clock: WallClock
    private let logger: Logger
    private let processor: MessageProcessor
    private let client: MQTTClient
    private let instanceID: String
    private let slot: ServedSlot?
    /// The hubs' and accessories' topic root: the configured one, or the slot's.
    private let root: TopicRoot
    private let offlineStatus: @Sendable () -> MQTTMessage
    private let rebuilt = Atomic(false)
    private let stopping = StopSignal()
    /// A slot's session hands nothing to the processor until the slot is rebuilt.
    private let held: HeldHandler?
    private let onServing: (@Sendable () -> Void)?

    /// Creates the bridge; it connects when run.
    ///
    /// - Parameters:
    ///   - metrics: where the counters go (the bootstrapped metrics system by default).
    ///   - instanceID: distinguishes this run's command ids from earlier runs' (random by default).
    ///   - slot: in a cluster, the slot served (its client id is the configuration's); `nil`: every hub.
    ///   - loops: the network threads its connections share with others' (a cluster's slots); `nil`: a thread of
    ///     its own.
    ///   - onServing: called once rebuilt, when it serves.
    public init(
        configuration: BridgeConfiguration, logger: Logger, clock: WallClock = .system,
        metrics: any MetricsFactory = MetricsSystem.factory,
        instanceID: String = String(UInt32.random(in: .min ... .max), radix: 16), slot: ServedSlot? = nil,
        sharedDevices: SharedDeviceLink? = nil, loops: MQTTLoopGroup? = nil, onServing: (@Sendable () -> Void)? = nil
    ) throws(MQTTError) {
        self.configuration = configuration
        self.clock = clock
        var logger = logger
        if let slot { logger[metadataKey: "slot"] = "\(slot.slot.number)" }
        self.logger = logger
        self.instanceID = instanceID
        self.slot = slot
        self.onServing = onServing
        root = TopicRoots(configuration.topicRoot, slot: slot).root
        let startedAt = clock.now
        var mqtt = configuration.mqtt
        // A persistent session: telemetry that arrives while the bridge is away waits for it, as long as the session
        // outlives the absence. (The send window's width is MQTTConfiguration.maximumInflightMessages's, which says
        // why it stays narrow.)
        mqtt.cleanStart = false
        mqtt.sessionExpiry = configuration.sessionExpiry
        let statuses = BridgeStatuses(root: root, format: configuration.payloadFormat, version: configuration.version)
        let will = statuses.status(online: false, since: startedAt)
        var online = [statuses.status(online: true, since: startedAt)]
        if let layout = statuses.layout(of: slot, under: configuration.topicRoot) {
            online.append(layout)
        }
        if configuration.publishingSession {
            // What the bridge publishes leaves through a session of its own, so that the bridge can stop reading while
            // the broker is slower than the telemetry: what it does not read waits at the broker, in its persistent
            // session, rather than being answered late or not at all. The will goes with what publishes the status;
            // the receiving session's is home automation's availability (a connection has one will).
            var publishing = mqtt.publishingSession
            publishing.will = will
            if configuration.homeAutomation {
                mqtt.will = statuses.availability(online: false)
                online.append(statuses.availability(online: true))
            }
            client = try MQTTClient(configuration: mqtt, publishingSession: publishing, loops: loops, logger: logger)
        } else {
            mqtt.will = will
            client = try MQTTClient(configuration: mqtt, loops: loops, logger: logger)
        }
        offlineStatus = { statuses.status(online: false, since: clock.now) }
        processor = MessageProcessor(
            configuration: configuration, instanceID: instanceID, publisher: client, clock: clock, logger: logger,
            metrics: metrics, onlineStatus: online, slot: slot, sharedDevices: sharedDevices)
        sharedDevices?.onPost { [client] in client.wakeHandler() }
        held = slot.map { [processor] _ in HeldHandler(processor) }
    }

    /// Home automation's availability needs a connection of its own (an ``AvailabilityBeacon``): the bridge's one
    /// connection carries the BridgeStatus's will (`--no-publishing-session`).
    private var availabilityOnItsOwn: Bool { configuration.homeAutomation && !configuration.publishingSession }

    /// The buckets of the bridge's duration histograms, by metric label, for a metrics backend that takes them
    /// (the defaults of Prometheus clients, 5 ms – 10 s, are far above the microseconds a message takes).
    public static var histogramBuckets: [String: [Duration]] { BridgeMetrics.histogramBuckets }

    /// Why the bridge is not ready to serve (empty when it is): it must have rebuilt from the retained states and be
    /// connected to the broker. For `/health/ready`; callable from any thread.
    public var notReadyBecause: [String] {
        var reasons: [String] = []
        let what = slot.map { "\($0.slot): " } ?? ""
        if !rebuilt.load(ordering: .acquiring) { reasons.append(what + "rebuilding from the retained states") }
        if !client.isConnected { reasons.append(what + "not connected to the broker") }
        return reasons
    }

    /// Ends ``run()``: at once while starting (waiting for the broker, rebuilding), else as a graceful shutdown does
    /// (the offline status, then the connection closed). A cluster stops a slot it no longer owns this way.
    public func stop() {
        stopping.signal()
    }

    deinit {
        // A bridge whose run() never came (another service of its group failed first) still lets go of its client.
        client.syncClose()
    }

    public func run() async throws {
        do {
            try await serve()
        } catch {
            // Whatever ended it, the connection is let go of (a debug build asserts that it was).
            await client.close()
            processor.stopped()
            throw error
        }
        await client.close()
        processor.stopped()
    }

    /// What the bridge's session reads: its hubs' telemetry and statuses, the person's controls, Home Assistant's
    /// birth message, and the playing devices' states (one bridge: every device's; a slot: each device its accessories
    /// list, subscribed one by one once it is rebuilt). Never a head-tracking frame: frames go from the hub straight
    /// to the host (rule 13).
    public static func subscriptionFilters(under root: TopicRoot, slot: Bool, homeAssistantPrefix: String?) -> [String] {
        let kinds: [Topic.Kind] = slot ? [.telemetry, .hubStatus, .controls] : [.telemetry, .hubStatus, .sourceState, .controls]
        // Home Assistant's birth message: it needs every device again after it restarts.
        return kinds.map { $0.filter(under: root) } + (homeAssistantPrefix.map { ["\($0)/status"] } ?? [])
    }

    /// Rebuilds, serves until a graceful shutdown or ``stop()``, then says offline. A shutdown or a stop during
    /// start-up ends it quietly.
    private func serve() async throws {
        HeapTrimmer.configureAllocator()
        let prefix = configuration.homeAutomation ? configuration.homeAssistantPrefix : nil
        for filter in Self.subscriptionFilters(under: root, slot: slot != nil, homeAssistantPrefix: prefix) {
            try client.subscribe(filter, qos: .atLeastOnce)
        }
        logger.info(
            "starting",
            metadata: [
                "mqtt.host": "\(configuration.mqtt.host)", "mqtt.port": "\(configuration.mqtt.port)",
                "mqtt.client_id": "\(configuration.mqtt.clientID)", "topic_root": "\(root)",
                "payload_format": "\(configuration.payloadFormat)", "version": "\(configuration.version)",
                "slot": "\(slot.map { "\($0)" } ?? "all")",
            ])
        do {
            try await untilStopped { try await self.start() }
        } catch {
            // A stop (SIGTERM, Ctrl-C, the cluster) while waiting for the broker or reading the retained states is
            // routine.
            guard Task.isShuttingDownGracefully || Task.isCancelled || stopping.isSignalled else { throw error }
            logger.info("stopped before start-up finished")
            return
        }
        rebuilt.store(true, ordering: .releasing)
        onServing?()
        let beacon = try availabilityOnItsOwn
            ? AvailabilityBeacon(configuration: configuration, root: root, logger: logger) : nil
        await untilStopped()

        logger.info("shutting down")
        // A broker that goes away now (stopped beside the bridge) is no reason to reconnect.
        client.drain()
        if slot == nil {
            // Nobody takes a single bridge's head-tracking sessions over: they end now (a cluster's slot is taken
            // over with its sessions).
            processor.shutdown.request(waking: client.wakeHandler)
            await processor.shutdown.wait(timeout: .seconds(1))
        }
        _ = try? client.publish(offlineStatus())
        if configuration.homeAutomation, !availabilityOnItsOwn {
            _ = try? client.publish(BridgeStatuses.availability(online: false, under: root))
        }
        await beacon?.stop()
    }

    /// Rebuilds and starts reading. One bridge: the retained states first (the persistent session delivers the
    /// telemetry that waited for the bridge as soon as it connects, and that telemetry must meet the accessories as
    /// they were), then the connection. A slot: its connection first, reading nothing (the broker's session takeover
    /// cuts off an old owner: nothing it sends after that reaches the broker, so the states read next are the last it
    /// published), then its states, then it reads.
    private func start() async throws {
        guard let held else {
            try await rebuild()
            // From here on the client's network thread owns the processor.
            try client.start(processor)
            return
        }
        client.holdReading()
        try client.start(held)
        try await client.waitUntilConnected()
        try await rebuild()
        for topic in processor.sourceSubscriptions {
            try client.subscribe(topic, qos: .atLeastOnce)
        }
        // From here on the client's network thread owns the processor (the handler passes everything on).
        held.release()
        client.resumeReading()
    }

    /// Returns when the bridge is to stop: a graceful shutdown, ``stop()``, or a cancellation.
    private func untilStopped() async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { try? await gracefulShutdown() }
            group.addTask { [stopping] in await stopping.wait() }
            await group.next()
            group.cancelAll()
        }
    }

    /// Runs `body` until it ends or the bridge is to stop (then `body` is cancelled and this throws).
    private func untilStopped(_ body: @escaping @Sendable () async throws -> Void) async throws {
        try await withThrowingTaskGroup(of: Bool.self) { group in
            group.addTask {
                try await body()
                return true
            }
            group.addTask { [self] in
                await untilStopped()
                return false
            }
            let finished = try await group.next()!
            group.cancelAll()
            if !finished { throw CancellationError() }
        }
    }

    /// Reads the retained states through a short clean session, and rebuilds from them: one bridge, every accessory
    /// and playing device; a slot, its accessories, then the playing devices they list. Waits for the broker as long
    /// as it takes; a stop cancels it.
    private func rebuild() async throws {
        let clock = ContinuousClock()
        let started = clock.now
        var filters: [(String, QoS)] = [(Topic.Kind.accessoryState.filter(under: root), .atMostOnce)]
        if slot == nil { filters.append((Topic.Kind.sourceState.filter(under: root), .atMostOnce)) }
        if let configs = processor.discoveryConfigFilter {
            // This bridge's (or slot's) retained discovery configs: those of accessories that no longer exist are
            // removed.
            filters.append((configs, .atLeastOnce))
        }
        try await readRetained(filters, pass: "states")
        if slot != nil {
            let sources = processor.sourceSubscriptions
            if !sources.isEmpty { try await readRetained(sources.map { ($0, .atMostOnce) }, pass: "sources") }
        }
        try Task.checkCancellation()
        let restored = processor.restoringFinished()
        logger.info(
            "rebuilt from the retained states",
            metadata: [
                "accessories": "\(restored.accessories)", "sources": "\(restored.sources)",
                "discovery_configs": "\(restored.configs)", "unusable": "\(restored.skipped)",
                "rebuild_ms": "\((clock.now - started).wholeMilliseconds)",
            ])
    }

    /// Reads the retained messages of `filters` through a short clean session and restores them, until a marker
    /// published after subscribing comes back.
    private func readRetained(_ filters: [(String, QoS)], pass: String) async throws {
        var mqtt = configuration.mqtt.companion(clientID: configuration.mqtt.clientID + "-rebuild")
        // The states are read at QoS 0: no acknowledgement per state, which halves a restart (`make bench-memory`,
        // 200,000 accessories: 6.0 s at QoS 1, 3.0 s at QoS 0). It is as safe as QoS 1 (mosquitto 2.0, src/database.c):
        // a connected client's QoS 0 messages go into the same ordered list as its QoS 1 ones, so the marker still
        // comes last, and they are dropped only once max_queued_messages packets wait for it, which deploy/mosquitto
        // already sizes above the accessories and devices. The discovery configs and the marker stay QoS 1: take as
        // many in flight as MQTT allows.
        mqtt.maximumIncomingInflightMessages = 65_535
        // A slot's session must not be cut off by its own reader.
        mqtt.connectionGate = nil
        // The broker handles a client's packets in order: once this comes back, every retained state has arrived.
        let marker = root.rebuildMarker("\(instanceID)-\(pass)")
        // Decoded on the reader's network thread as they arrive, and restored on this task meanwhile, a batch at a
        // time (there may be a million).
        let collected = RetainedStates(marker: marker, processor: processor)
        async let restoring: Void = collected.restoreAll()
        let reader = try MQTTClient(configuration: mqtt, logger: logger)
        for (filter, qos) in filters {
            try reader.subscribe(filter, qos: qos)
        }
        try reader.subscribe(marker, qos: .atLeastOnce)
        try reader.start { collected.receive($0) }
        do {
            try await reader.waitUntilConnected()
        } catch {
            await reader.close()
            throw error
        }
        try reader.publish(MQTTMessage(topic: marker, payload: [], qos: .atLeastOnce))

        let timeout = configuration.rebuildTimeout
        let watchdog = Task { [logger] in
            try await Task.sleep(for: timeout)
            logger.warning("reading the retained states took too long; going on with what arrived")
            collected.finish()
        }
        defer { watchdog.cancel() }
        await collected.finished()
        // Joins the reader's network thread; once the last batch is in, the processor is this task's again.
        await reader.close()
        collected.endOfInput()
        await restoring
    }
}

/// The bridge's retained BridgeStatus messages: online on every connection, offline by its will and on shutdown; and
/// its layout.
public struct BridgeStatuses: Sendable {
    let root: TopicRoot
    let format: PayloadFormat
    let version: String

    func status(online: Bool, since: Timestamp) -> MQTTMessage {
        let status = BridgeStatus(online: online, version: version, since: since)
        return MQTTMessage(
            topic: Topic.bridgeStatus.name(under: root), payload: WireCodec().encode(status, as: format),
            qos: .atLeastOnce, retain: true, properties: MQTTProperties(contentType: format.contentType))
    }

    /// `R/bridge/layout` under the cluster's root, retained, for hubs that read their slot count: a single bridge's (no
    /// slots), or a cluster's from the owner of its slot 0 (one writer, on each connection of that slot); `nil` for
    /// the other slots. It has no will: the layout stays when the bridge goes.
    func layout(of slot: ServedSlot?, under root: TopicRoot) -> MQTTMessage? {
        guard slot.map({ $0.slot.number == 0 }) ?? true else { return nil }
        return Self.layout(BridgeLayout(slots: slot?.slot.slots, version: version), under: root, format: format)
    }

    /// The retained `R/bridge/layout` message of `layout` (a reshard publishes its new count with it too).
    public static func layout(_ layout: BridgeLayout, under root: TopicRoot, format: PayloadFormat) -> MQTTMessage {
        MQTTMessage(
            topic: Topic.bridgeLayout.name(under: root), payload: WireCodec().encode(layout, as: format),
            qos: .atLeastOnce, retain: true, properties: MQTTProperties(contentType: format.contentType))
    }

    /// `R/bridge/availability`: home automation's "online" or "offline", retained.
    func availability(online: Bool) -> MQTTMessage {
        Self.availability(online: online, under: root)
    }

    static func availability(online: Bool, under root: TopicRoot) -> MQTTMessage {
        MQTTMessage(
            topic: Topic.bridgeAvailability.name(under: root), payload: Array((online ? "online" : "offline").utf8),
            qos: .atLeastOnce, retain: true)
    }
}

/// `R/bridge/availability` for home automation when the bridge has one connection (`--no-publishing-session`), whose
/// will is its BridgeStatus: "online" (retained) on a connection of its own, whose will says "offline". (With the
/// publishing session, the receiving session's will says it, and the processor publishes "online" on every
/// connection.) Home Assistant's entities are unavailable whenever this says offline.
final class AvailabilityBeacon: Sendable {
    private let client: MQTTClient
    private let root: TopicRoot

    init(configuration: BridgeConfiguration, root: TopicRoot, logger: Logger) throws(MQTTError) {
        self.root = root
        let mqtt = configuration.mqtt.companion(
            clientID: configuration.mqtt.clientID + "-availability",
            will: BridgeStatuses.availability(online: false, under: root))
        client = try MQTTClient(configuration: mqtt, logger: logger)
        let client = client
        let online = BridgeStatuses.availability(online: true, under: root)
        try client.start(onEvent: { event in
            if case .connected = event { _ = try? client.publish(online) }
        }, onMessage: { _ in })
    }

    /// Says offline and disconnects (the will is for when the process dies).
    func stop() async {
        _ = try? client.publish(BridgeStatuses.availability(online: false, under: root))
        await client.close()
    }
}
