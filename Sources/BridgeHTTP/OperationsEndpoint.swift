import Hummingbird
import Logging
import NIOCore
import Prometheus
import ServiceLifecycle

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The bridge's operations endpoint over HTTP, for Prometheus and for supervisors (systemd, Kubernetes, compose):
///
/// - `GET /metrics`: every metric of `registry` in Prometheus' text format.
/// - `GET /health/live`: 200 while the process serves HTTP at all.
/// - `GET /health/ready`: 200 when `notReadyBecause` is empty; otherwise 503 with one reason per line.
///
/// ``service(logger:onRunning:)`` is a `Service` for the bridge's ServiceGroup: it stops on graceful shutdown.
public struct OperationsEndpoint: Sendable {
    public var host: String
    public var port: Int
    public let registry: PrometheusCollectorRegistry
    public let notReadyBecause: @Sendable () -> [String]

    public init(
        host: String, port: Int, registry: PrometheusCollectorRegistry,
        notReadyBecause: @escaping @Sendable () -> [String]
    ) {
        self.host = host
        self.port = port
        self.registry = registry
        self.notReadyBecause = notReadyBecause
    }

    /// The endpoint as a Service. `onRunning` receives the port it listens on (the one chosen when `port` is 0).
    /// An address it cannot listen on ends it with a ``ListenError`` that names the address and the options to change.
    public func service(logger: Logger, onRunning: @escaping @Sendable (Int) async -> Void = { _ in }) -> some Service {
        ListeningService(application: application(logger: logger, onRunning: onRunning), host: host, port: port)
    }

    private func application(logger: Logger, onRunning: @escaping @Sendable (Int) async -> Void) -> some Service {
        let router = Router()
        let (registry, notReadyBecause) = (registry, notReadyBecause)
        router.get("metrics") { _, _ in
            Response(
                status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
                body: ResponseBody(byteBuffer: ByteBuffer(bytes: registry.emitToBuffer())))
        }
        router.get("health/live") { _, _ in
            Self.text(.ok, "live\n")
        }
        router.get("health/ready") { _, _ in
            let reasons = notReadyBecause()
            return reasons.isEmpty
                ? Self.text(.ok, "ready\n") : Self.text(.serviceUnavailable, reasons.joined(separator: "\n") + "\n")
        }
        return Application(
            router: router, configuration: .init(address: .hostname(host, port: port), serverName: nil),
            onServerRunning: { channel in await onRunning(channel.localAddress?.port ?? 0) }, logger: logger)
    }

    private static func text(_ status: HTTPResponse.Status, _ body: String) -> Response {
        Response(
            status: status, headers: [.contentType: "text/plain; charset=utf-8"],
            body: ResponseBody(byteBuffer: ByteBuffer(string: body)))
    }
}

/// The endpoint could not listen on its address: which address, why, and which options change it.
public struct ListenError: Error, CustomStringConvertible {
    public var host: String
    public var port: Int
    /// `strerror`'s text.
    public var reason: String

    public var description: String {
        "cannot serve /metrics and /health on \(host):\(port): \(reason) (another bridge?): choose another port with "
            + "--http-port (0: any free one), or turn the endpoint off with --no-http"
    }
}

/// Runs the Hummingbird application; a failure to bind its socket becomes a ``ListenError``.
private struct ListeningService<Application: Service>: Service {
    let application: Application
    let host: String
    let port: Int

    func run() async throws {
        do {
            try await application.run()
        } catch let error as IOError {
            throw ListenError(host: host, port: port, reason: String(cString: strerror(error.errnoCode)))
        }
    }
}

extension PrometheusMetricsFactory {
    /// A factory for `registry` whose duration histograms use `buckets` (by metric label) instead of Prometheus'
    /// 5 ms – 10 s defaults.
    public static func with(registry: PrometheusCollectorRegistry, buckets: [String: [Duration]]) -> Self {
        var factory = PrometheusMetricsFactory(registry: registry)
        factory.durationHistogramBuckets = buckets
        return factory
    }
}
