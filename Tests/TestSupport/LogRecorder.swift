import Logging
import Synchronization

/// Keeps every log line, rendered as `level message key=value …`, for tests that check what the bridge logs.
public final class LogRecorder: LogHandler, Sendable {
    private let lines = Mutex<[String]>([])

    public init() {}

    public var logLevel: Logger.Level {
        get { .trace }
        set {}
    }
    public var metadata: Logger.Metadata {
        get { [:] }
        set {}
    }
    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { nil }
        set {}
    }

    public func log(event: LogEvent) {
        let metadata = (event.metadata ?? [:]).sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
        let line = (["\(event.level)", "\(event.message)"] + metadata).joined(separator: " ")
        lines.withLock { $0.append(line) }
    }

    public var all: [String] { lines.withLock { $0 } }
}
