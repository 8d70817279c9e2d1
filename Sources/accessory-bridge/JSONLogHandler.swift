import AccessoryWire
import Foundation
import Logging

/// Writes one JSON object per line to standard error: `{"time":…,"level":…,"label":…,"message":…, metadata…}`, its
/// keys sorted, every value a string.
///
/// Written by hand: a member taking up a thousand slots logs a few lines for each, and Foundation's
/// `ISO8601DateFormatter` (made for every line) and `JSONSerialization` with sorted keys took half its CPU while it did
/// (docs/performance-history.md, "A log line's cost").
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

    func log(event: LogEvent) {
        var line = Self.line(
            time: Self.now(), level: event.level, label: label, message: "\(event.message)",
            metadata: metadata.merging(event.metadata ?? [:], uniquingKeysWith: { $1 }))
        line.append(0x0A)
        FileHandle.standardError.write(Data(line))
    }

    /// The line's JSON object (without its newline): the four fields and the metadata's, keys sorted (a metadata key
    /// named like one of the four is left out).
    static func line(
        time: timespec, level: Logger.Level, label: String, message: String, metadata: Logger.Metadata
    ) -> [UInt8] {
        var timeBytes: [UInt8] = []
        appendTime(time, to: &timeBytes)
        var fields: [(key: String, value: String)] = [
            ("label", label), ("level", level.rawValue), ("message", message),
            ("time", String(decoding: timeBytes, as: UTF8.self)),
        ]
        let own = Set(fields.map(\.key))
        for (key, value) in metadata where !own.contains(key) {
            fields.append((key, "\(value)"))
        }
        fields.sort { $0.key < $1.key }
        var bytes: [UInt8] = [UInt8(ascii: "{")]
        bytes.reserveCapacity(256)
        for field in fields {
            if bytes.count > 1 { bytes.append(UInt8(ascii: ",")) }
            JSONString.append(field.key, to: &bytes)
            bytes.append(UInt8(ascii: ":"))
            JSONString.append(field.value, to: &bytes)
        }
        bytes.append(UInt8(ascii: "}"))
        return bytes
    }

    /// The wall clock's time now.
    static func now() -> timespec {
        var time = timespec()
        clock_gettime(CLOCK_REALTIME, &time)
        return time
    }

    /// RFC 3339 with milliseconds, in UTC: `2026-11-26T10:42:54.123Z` (milliseconds: a takeover or a handover is
    /// measured in them).
    static func appendTime(_ time: timespec, to bytes: inout [UInt8]) {
        var seconds = time.tv_sec
        var parts = tm()
        gmtime_r(&seconds, &parts)
        func digits(_ value: Int, _ count: Int) {
            var divisor = 1
            for _ in 1..<count { divisor *= 10 }
            var rest = value
            while divisor > 0 {
                bytes.append(UInt8(ascii: "0") + UInt8(rest / divisor % 10))
                rest %= divisor
                divisor /= 10
            }
        }
        digits(Int(parts.tm_year) + 1900, 4)
        bytes.append(UInt8(ascii: "-"))
        digits(Int(parts.tm_mon) + 1, 2)
        bytes.append(UInt8(ascii: "-"))
        digits(Int(parts.tm_mday), 2)
        bytes.append(UInt8(ascii: "T"))
        digits(Int(parts.tm_hour), 2)
        bytes.append(UInt8(ascii: ":"))
        digits(Int(parts.tm_min), 2)
        bytes.append(UInt8(ascii: ":"))
        digits(Int(parts.tm_sec), 2)
        bytes.append(UInt8(ascii: "."))
        digits(time.tv_nsec / 1_000_000, 3)
        bytes.append(UInt8(ascii: "Z"))
    }
}
