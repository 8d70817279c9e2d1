import AccessoryModel
import AccessoryWire
import CoreMetrics
import Logging
import MQTTClient
import ServiceLifecycle
import Synchronization

/// The bridge as a `Service`: connects to the broker, subscribes to telemetry, hub statuses and source states,
/// handles each message as it arrives, runs the one timer loop, and announces itself with a retained BridgeStatus
/// (online on every connection; offline by its will and on graceful shutdown).
public final class AccessoryBridgeService: Service {
    private let configuration: BridgeConfiguration
    private let clock: WallClock
    private let logger: Logger
    private let processor: MessageProcessor
    private let client: MQTTClient
    private let startedAt: Timestamp

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
        startedAt = clock.now
        let publisher = LateBoundPublisher()
        let processor = MessageProcessor(
            configuration: configuration, instanceID: instanceID, publisher: publisher, clock: clock, logger: logger,
            metrics: metrics)
        self.processor = processor
        let outbox = processor.outboxForStatus
        var mqtt = configuration.mqtt
        mqtt.will = outbox.bridgeStatus(online: false, version: configuration.version, since: startedAt)
        let online = outbox.bridgeStatus(online: true, version: configuration.version, since: startedAt)
        let logger = logger
        client = try MQTTClient(
            configuration: mqtt, logger: logger,
            onMessage: { processor.handle($0) },
            onEvent: { event in
                switch event {
                case .connected(let sessionPresent):
                    logger.info("connected to the broker", metadata: ["mqtt.session_present": "\(sessionPresent)"])
                    outbox.publish(online)
                case .connectionRefused(let error):
                    logger.error("the broker refused the connection", metadata: ["error": "\(error)"])
                case .disconnected(let error?):
                    logger.warning("lost the broker; reconnecting", metadata: ["error": "\(error)"])
                case .disconnected(nil):
                    logger.info("disconnected from the broker")
                case .subscriptionRefused(let filter, let error):
                    logger.error(
                        "the broker refused a subscription", metadata: ["mqtt.filter": "\(filter)", "error": "\(error)"])
                }
            })
        publisher.bind(to: client)
    }

    public func run() async throws {
        let root = configuration.topicRoot
        for kind in [Topic.Kind.telemetry, .hubStatus, .sourceState] {
            try client.subscribe(kind.filter(under: root), qos: .atLeastOnce)
        }
        logger.info(
            "starting",
            metadata: [
                "mqtt.host": "\(configuration.mqtt.host)", "mqtt.port": "\(configuration.mqtt.port)",
                "mqtt.client_id": "\(configuration.mqtt.clientID)", "topic_root": "\(root)",
                "payload_format": "\(configuration.payloadFormat)", "version": "\(configuration.version)",
            ])
        try client.start()

        let stopping = Atomic(false)
        await withGracefulShutdownHandler {
            await runTimers(until: stopping)
        } onGracefulShutdown: {
            stopping.store(true, ordering: .relaxed)
        }

        logger.info("shutting down")
        processor.outboxForStatus.publish(
            processor.outboxForStatus.bridgeStatus(online: false, version: configuration.version, since: clock.now))
        await client.disconnect()
        client.close()
    }

    /// The one clock: sleeps until the earliest deadline (at most the configured granularity) and ticks.
    private func runTimers(until stopping: borrowing Atomic<Bool>) async {
        while !stopping.load(ordering: .relaxed) && !Task.isCancelled {
            let now = clock.now
            var pause = configuration.timerGranularity
            if let earliest = processor.scheduler.earliest {
                pause = max(.zero, min(pause, earliest - now))
            }
            try? await Task.sleep(for: pause)
            processor.tick()
        }
    }
}
