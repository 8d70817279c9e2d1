import Foundation
import Logging

/// Writes one JSON object per line to standard error: `{"time":…,"level":…,"label":…,"message":…, metadata…}`.
struct JSONLogHandler: LogHandler {
    let label: String
    var logLevel: Logger.Level = .info
    var metadata: Logger.Metadata = [:]

    init(label: String) {
        self.label = label
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    /// RFC 3339 with milliseconds, in UTC: `2026-11-26T10:42:54.123Z`.
    static var timeFormat: ISO8601DateFormatter {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter
    }

    func log(event: LogEvent) {
        var object: [String: Any] = [
            // Milliseconds: a takeover or a handover is measured in them.
            "time": Self.timeFormat.string(from: Date()),
            "level": event.level.rawValue,
            "label": label,
            "message": "\(event.message)",
        ]
        for (key, value) in metadata.merging(event.metadata ?? [:], uniquingKeysWith: { $1 }) {
            object[key] = "\(value)"
        }
        guard var line = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]) else { return }
        line.append(0x0A)
        FileHandle.standardError.write(line)
    }
}
