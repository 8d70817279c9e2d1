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
public final class AccessoryBridgeService: Service {
    private let configuration: BridgeConfiguration
    private let clock: WallClock
    private let logger: Logger
    private let processor: MessageProcessor
    private let client: MQTTClient
    private let instanceID: String
    private let offlineStatus: @Sendable () -> MQTTMessage
    private let rebuilt = Atomic(false)

    /// Creates the bridge; it connects when run.
    ///
    /// - Parameters:
    ///   - metrics: where the counters go (the bootstrapped metrics system by default).
    ///   - instanceID: distinguishes this run's command ids from earlier runs' (random by default).
    public init(
        configuration: BridgeConfiguration, logger: Logger, clock: WallClock = .system,
        metrics: any MetricsFactory = MetricsSystem.factory,
        instanceID: String = String(UInt32.random(in: .min ... .max), radix: 16)
    ) throws(MQTTError) {
        self.configuration = configuration
        self.clock = clock
        self.logger = logger
        self.instanceID = instanceID
        let startedAt = clock.now
        var mqtt = configuration.mqtt
        // A persistent session: telemetry that arrives while the bridge is away waits for it.
        mqtt.cleanStart = false
        // The send window stays narrow (MQTTConfiguration.maximumInflightMessages): libmosquitto walks its list of
        // outgoing messages on every acknowledgement, so 8,192 in flight spent 68% of the bridge's time there
        // (`make bench-e2e` with PERF=1). A crash can leave answers unsent behind a narrow window; hubs retry until
        // they get an answer, and a retry is answered with its original outcome (see "For hub authors").
        mqtt.sessionExpiry = configuration.sessionExpiry
        let statuses = BridgeStatuses(
            root: configuration.topicRoot, format: configuration.payloadFormat, version: configuration.version)
        let will = statuses.status(online: false, since: startedAt)
        if configuration.publishingSession {
            // What the bridge publishes leaves through a session of its own, so that the bridge can stop reading while
            // the broker is slower than the telemetry: what it does not read waits at the broker, in its persistent
            // session, rather than being answered late or not at all. The will goes with what publishes the status.
            var publishing = mqtt.publishingSession
            publishing.will = will
            client = try MQTTClient(configuration: mqtt, publishingSession: publishing, logger: logger)
        } else {
            mqtt.will = will
            client = try MQTTClient(configuration: mqtt, logger: logger)
        }
        offlineStatus = { statuses.status(online: false, since: clock.now) }
        processor = MessageProcessor(
            configuration: configuration, instanceID: instanceID, publisher: client, clock: clock, logger: logger,
            metrics: metrics, onlineStatus: statuses.status(online: true, since: startedAt))
    }

    /// The buckets of the bridge's duration histograms, by metric label, for a metrics backend that takes them
    /// (the defaults of Prometheus clients, 5 ms – 10 s, are far above the microseconds a message takes).
    public static var histogramBuckets: [String: [Duration]] { BridgeMetrics.histogramBuckets }

    /// Why the bridge is not ready to serve (empty when it is): it must have rebuilt from the retained states and be
    /// connected to the broker. For `/health/ready`; callable from any thread.
    public var notReadyBecause: [String] {
        var reasons: [String] = []
        if !rebuilt.load(ordering: .acquiring) { reasons.append("rebuilding from the retained states") }
        if !client.isConnected { reasons.append("not connected to the broker") }
        return reasons
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
            throw error
        }
        await client.close()
    }

    /// Rebuilds, serves until a graceful shutdown, then says offline. A shutdown during start-up ends it quietly.
    private func serve() async throws {
        HeapTrimmer.configureAllocator()
        let root = configuration.topicRoot
        for kind in [Topic.Kind.telemetry, .hubStatus, .sourceState, .controls] {
            try client.subscribe(kind.filter(under: root), qos: .atLeastOnce)
        }
        if configuration.homeAutomation, let prefix = configuration.homeAssistantPrefix {
            // Home Assistant's birth message: it needs every device again after it restarts.
            try client.subscribe("\(prefix)/status", qos: .atLeastOnce)
        }
        logger.info(
            "starting",
            metadata: [
                "mqtt.host": "\(configuration.mqtt.host)", "mqtt.port": "\(configuration.mqtt.port)",
                "mqtt.client_id": "\(configuration.mqtt.clientID)", "topic_root": "\(root)",
                "payload_format": "\(configuration.payloadFormat)", "version": "\(configuration.version)",
            ])
        // The retained states first: the persistent session delivers the telemetry that waited for the bridge as soon
        // as it connects, and that telemetry must meet the accessories as they were.
        do {
            try await cancelWhenGracefulShutdown { try await self.rebuild() }
        } catch {
            // A stop (SIGTERM, Ctrl-C) while waiting for the broker or reading the retained states is routine.
            guard Task.isShuttingDownGracefully || Task.isCancelled else { throw error }
            logger.info("shut down before start-up finished")
            return
        }
        // From here on the client's network thread owns the processor.
        try client.start(processor)
        rebuilt.store(true, ordering: .releasing)
        let beacon = try configuration.homeAutomation ? AvailabilityBeacon(configuration: configuration, logger: logger) : nil
        try? await gracefulShutdown()

        logger.info("shutting down")
        _ = try? client.publish(offlineStatus())
        await beacon?.stop()
    }

    /// Reads every retained accessory and source state through a short clean session, and rebuilds from them. Waits
    /// for the broker as long as it takes; a shutdown cancels it.
    private func rebuild() async throws {
        let clock = ContinuousClock()
        let started = clock.now
        var mqtt = configuration.mqtt
        mqtt.clientID += "-rebuild"
        mqtt.cleanStart = true
        mqtt.sessionExpiry = nil
        mqtt.will = nil
        // The states are read at QoS 0: no acknowledgement per state, which halves a restart (`make bench-memory`,
        // 200,000 accessories: 6.0 s at QoS 1, 3.0 s at QoS 0). It is as safe as QoS 1 (mosquitto 2.0, src/database.c):
        // a connected client's QoS 0 messages go into the same ordered list as its QoS 1 ones, so the marker still
        // comes last, and they are dropped only once max_queued_messages packets wait for it, which deploy/mosquitto
        // already sizes above the accessories and devices. The discovery configs and the marker stay QoS 1: take as
        // many in flight as MQTT allows.
        mqtt.maximumIncomingInflightMessages = 65_535
        let root = configuration.topicRoot
        // The broker handles a client's packets in order: once this comes back, every retained state has arrived.
        let marker = root.rebuildMarker(instanceID)
        // Decoded on the reader's network thread as they arrive, and restored on this task meanwhile, a batch at a
        // time (there may be a million).
        let collected = RetainedStates(marker: marker, processor: processor)
        async let restoring: Void = collected.restoreAll()
        let reader = try MQTTClient(configuration: mqtt, logger: logger)
        try reader.subscribe(Topic.Kind.accessoryState.filter(under: root), qos: .atMostOnce)
        try reader.subscribe(Topic.Kind.sourceState.filter(under: root), qos: .atMostOnce)
        if configuration.homeAutomation, let prefix = configuration.homeAssistantPrefix {
            // This bridge's retained discovery configs: those of accessories that no longer exist are removed.
            try reader.subscribe(HomeAssistantDiscovery(prefix: prefix, root: root).configFilter, qos: .atLeastOnce)
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
        try Task.checkCancellation()
        let restored = processor.restoringFinished()
        logger.info(
            "rebuilt from the retained states",
            metadata: [
                "accessories": "\(restored.accessories)", "sources": "\(restored.sources)",
                "unusable": "\(restored.skipped)", "rebuild_ms": "\((clock.now - started).nanoseconds / 1_000_000)",
            ])
    }
}

/// The bridge's retained BridgeStatus messages: online on every connection, offline by its will and on shutdown.
struct BridgeStatuses: Sendable {
    let root: TopicRoot
    let format: PayloadFormat
    let version: String

    func status(online: Bool, since: Timestamp) -> MQTTMessage {
        let status = BridgeStatus(online: online, version: version, since: since)
        return MQTTMessage(
            topic: Topic.bridgeStatus.name(under: root), payload: WireCodec().encode(status, as: format),
            qos: .atLeastOnce, retain: true, properties: MQTTProperties(contentType: format.contentType))
    }
}

/// `R/bridge/availability` for home automation: "online" (retained) on a connection of its own, whose will says
/// "offline" — the bridge's own connection's will is its BridgeStatus, and a connection has one will. Home Assistant's
/// entities are unavailable whenever this says offline.
final class AvailabilityBeacon: Sendable {
    private let client: MQTTClient
    private let topic: String

    init(configuration: BridgeConfiguration, logger: Logger) throws(MQTTError) {
        topic = Topic.bridgeAvailability.name(under: configuration.topicRoot)
        var mqtt = configuration.mqtt
        mqtt.clientID += "-availability"
        mqtt.cleanStart = true
        mqtt.sessionExpiry = nil
        mqtt.will = Self.message("offline", on: topic)
        client = try MQTTClient(configuration: mqtt, logger: logger)
        let (client, topic) = (client, topic)
        try client.start(onEvent: { event in
            if case .connected = event { _ = try? client.publish(Self.message("online", on: topic)) }
        }, onMessage: { _ in })
    }

    /// Says offline and disconnects (the will is for when the process dies).
    func stop() async {
        _ = try? client.publish(Self.message("offline", on: topic))
        await client.close()
    }

    private static func message(_ text: String, on topic: String) -> MQTTMessage {
        MQTTMessage(topic: topic, payload: Array(text.utf8), qos: .atLeastOnce, retain: true)
    }
}
