import AccessoryBridge
import AccessoryWire
import ArgumentParser
import BridgeHTTP
import Logging
import Metrics
import Prometheus
import ServiceLifecycle

/// `accessory-bridge`: parses the settings, builds the bridge and runs it in one ServiceGroup until SIGTERM or
/// SIGINT. Every setting can also come from the environment (`AUDIO_BRIDGE_<NAME>`) or a JSON config file; a flag
/// wins over the environment, which wins over the file.
@main
struct AccessoryBridgeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "accessory-bridge",
        abstract: "Bridges AudioAccessoryKit-style accessory telemetry over MQTT to audio switching commands.",
        discussion: """
            Every option can also be set in the environment, as AUDIO_BRIDGE_ followed by the option's name in \
            capitals with '_' for '-' (AUDIO_BRIDGE_TOPIC_ROOT for --topic-root), or in a JSON config file given by \
            --config-file or AUDIO_BRIDGE_CONFIG_FILE, as {"topic-root": "audio", ...}. A flag wins over the \
            environment, which wins over the file.
            """,
        version: Release.version)

    @OptionGroup var options: Settings.Options

    func run() async throws {
        let settings = try await Settings.resolve(options)
        LoggingSystem.bootstrap(settings.logHandlerFactory)
        var logger = Logger(label: "accessory-bridge")
        logger.logLevel = settings.logLevel
        let registry = PrometheusCollectorRegistry()
        MetricsSystem.bootstrap(
            PrometheusMetricsFactory.with(registry: registry, buckets: AccessoryBridgeService.histogramBuckets))
        let bridge = try AccessoryBridgeService(configuration: settings.bridge, logger: logger)
        var services: [any Service] = [bridge]
        if let http = settings.http {
            let endpoint = OperationsEndpoint(
                host: http.host, port: http.port, registry: registry, notReadyBecause: { bridge.notReadyBecause })
            services.append(endpoint.service(logger: logger) { [logger] port in
                logger.info("serving /metrics and /health", metadata: ["http.host": "\(http.host)", "http.port": "\(port)"])
            })
        }
        let group = ServiceGroup(
            configuration: .init(services: services, gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        try await group.run()
    }
}
