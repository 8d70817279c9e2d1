import AccessoryBridge
import AccessoryWire
import ArgumentParser
import BridgeCluster
import BridgeHTTP
import Etcd
import Logging
import Metrics
import MQTTClient
import Prometheus
import ServiceLifecycle
import Synchronization

/// `accessory-bridge`: reads the settings (``Settings``), builds the bridge and runs it in one ServiceGroup until
/// SIGTERM or SIGINT.
@main
struct AccessoryBridgeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "accessory-bridge",
        abstract: "Bridges AudioAccessoryKit-style accessory telemetry over MQTT to audio switching commands.",
        usage: "accessory-bridge [--<setting> <value> | --no-<setting>] ...",
        discussion: Settings.help + "\n\nA flag wins over the environment, which wins over the file.\n\n"
            + "accessory-bridge reshard: move the cluster to another slot count (accessory-bridge reshard --help).",
        version: Release.version,
        // Help is answered in run(): the settings take every argument, `reshard --help` among them.
        helpNames: [])

    /// The settings, read by ``Settings`` (whose table declares each one once, and says what is unknown).
    @Argument(parsing: .allUnrecognized, help: ArgumentHelp(visibility: .hidden))
    var settings: [String] = []

    func run() async throws {
        // The settings take every argument, so the one subcommand is told apart here.
        let asksForHelp = self.settings.contains("--help") || self.settings.contains("-h")
        if self.settings.first == "reshard" {
            if asksForHelp {
                print(ReshardCommand.helpMessage())
                return
            }
            do {
                try await ReshardCommand.parse(Array(self.settings.dropFirst())).run()
            } catch {
                ReshardCommand.exit(withError: error)
            }
            return
        }
        if asksForHelp {
            print(Self.helpMessage())
            return
        }
        let settings: Settings.Resolved
        do {
            settings = try await Settings.resolve(self.settings)
        } catch let invalid as Settings.Invalid {
            throw ValidationError(invalid.description)
        }
        do {
            try await serve(settings)
        } catch let error as MQTTError {
            throw StartupFailure(error, broker: settings.bridge.mqtt)
        }
    }

    private func serve(_ settings: Settings.Resolved) async throws {
        LoggingSystem.bootstrap(settings.logFormat.factory)
        var logger = Logger(label: "accessory-bridge")
        logger.logLevel = settings.logLevel
        let registry = PrometheusCollectorRegistry()
        MetricsSystem.bootstrap(
            PrometheusMetricsFactory.with(
                registry: registry,
                buckets: AccessoryBridgeService.histogramBuckets.merging(ClusterService.histogramBuckets) { $1 }))
        // One bridge, or a member of a cluster that serves the slots it owns.
        let bridge: any Service
        let notReadyBecause: @Sendable () -> [String]
        var etcd: EtcdClient?
        if let cluster = settings.cluster {
            // The member checks the limit against the cluster's slot count once it knows it (at its registration).
            if let limit = OpenFileLimit.raise(), limit.after > limit.before {
                logger.info("raised the open-file limit", metadata: ["from": "\(limit.before)", "to": "\(limit.after)"])
            }
            let client = try EtcdClient(endpoint: cluster.endpoint, tls: cluster.tls, logger: logger)
            etcd = client
            let member = try ClusterService(
                configuration: cluster, bridge: settings.bridge, store: client, logger: logger)
            (bridge, notReadyBecause) = (member, { member.notReadyBecause })
        } else {
            let single = try AccessoryBridgeService(configuration: settings.bridge, logger: logger)
            (bridge, notReadyBecause) = (single, { single.notReadyBecause })
        }
        defer { if let etcd { Task { await etcd.shutdown() } } }
        var services: [any Service] = []
        if let http = settings.httpListener {
            // The endpoint listens first: a port already taken is said before anything connects to the broker.
            let listening = Gate()
            let endpoint = OperationsEndpoint(
                host: http.host, port: http.port, registry: registry, notReadyBecause: notReadyBecause)
            services.append(endpoint.service(logger: logger) { [logger] port in
                logger.info("serving /metrics and /health", metadata: ["http.host": "\(http.host)", "http.port": "\(port)"])
                listening.open()
            })
            services.append(AfterGate(listening, bridge))
        } else {
            services.append(bridge)
        }
        try await Self.serviceGroup(services, logger: logger).run()
    }

    /// The bridge's services in one group, stopped gracefully by SIGTERM and SIGINT. When one of them ends (a start-up
    /// failure, a stop), the others are shut down gracefully too, never cancelled: cancelled, Hummingbird's server
    /// raced its own graceful shutdown against its closing channel, and now and then logged "Server shutdown error:
    /// Already closed" after the bridge's last line, the error that says why it stopped.
    static func serviceGroup(_ services: [any Service], logger: Logger) -> ServiceGroup {
        let configurations = services.map {
            ServiceGroupConfiguration.ServiceConfiguration(
                service: $0, successTerminationBehavior: .gracefullyShutdownGroup,
                failureTerminationBehavior: .gracefullyShutdownGroup)
        }
        return ServiceGroup(
            configuration: .init(services: configurations, gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
    }
}

/// The bridge could not connect in a way that trying again cannot mend (credentials, authorization, TLS), in one
/// line for a person: where, why, and which options to check.
struct StartupFailure: Error, CustomStringConvertible {
    let description: String

    init(_ error: MQTTError, broker: MQTTConfiguration) {
        let url = "\(broker.tls == nil ? "mqtt" : "mqtts")://\(broker.host):\(broker.port)"
        var text = "cannot connect to the broker at \(url): \(error.message)"
        if let hint = error.hint { text += ": \(hint)" }
        switch error.kind {
        case .connectionRefused: text += " (--username, --password or AUDIO_BRIDGE_PASSWORD, --client-id)"
        case .library: text += " (--ca-file, --cert-file, --key-file)"
        case .invalidArgument: text = error.message
        default: break
        }
        description = text
    }
}

/// Opens once; until then, its one waiter waits.
final class Gate: Sendable {
    private enum State {
        case closed(waiter: CheckedContinuation<Void, Never>?)
        case open
        /// The waiter's task was cancelled: it went away.
        case abandoned
    }

    private let state = Mutex(State.closed(waiter: nil))

    func open() {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard case .closed(let waiter) = state else { return nil }
            state = .open
            return waiter
        }
        waiter?.resume()
    }

    /// Returns once the gate is open; throws `CancellationError` when the task is cancelled first.
    func wait() async throws {
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let waits = state.withLock { state -> Bool in
                    guard case .closed = state else { return false }
                    state = .closed(waiter: continuation)
                    return true
                }
                if !waits { continuation.resume() }
            }
        } onCancel: {
            let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
                guard case .closed(let waiter) = state else { return nil }
                state = .abandoned
                return waiter
            }
            waiter?.resume()
        }
        try Task.checkCancellation()
    }
}

/// `service`, run once `gate` opens; a shutdown or a cancellation before that ends it without running it.
struct AfterGate: Service {
    let gate: Gate
    let service: any Service

    init(_ gate: Gate, _ service: any Service) {
        self.gate = gate
        self.service = service
    }

    func run() async throws {
        do {
            try await cancelWhenGracefulShutdown { try await gate.wait() }
        } catch {
            return
        }
        try await service.run()
    }
}
