import AccessoryModel

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The time, as the model and the wire count it (`*_unix_ms`). The bridge and the client read it here and nowhere
/// else; the model never reads a clock. Tests drive the bridge with a clock of their own.
public struct WallClock: Sendable {
    private let read: @Sendable () -> Timestamp

    public init(_ read: @escaping @Sendable () -> Timestamp) {
        self.read = read
    }

    public var now: Timestamp { read() }

    /// The system's real-time clock.
    public static let system = WallClock {
        var time = timespec()
        clock_gettime(CLOCK_REALTIME, &time)
        return Timestamp(unixMilliseconds: Int64(time.tv_sec) * 1000 + Int64(time.tv_nsec) / 1_000_000)
    }

    /// The system's real-time clock in microseconds since 1970: a head-tracking frame's `sent_at_unix_us`, whose
    /// latency counts in milliseconds.
    public static func unixMicroseconds() -> Int64 {
        var time = timespec()
        clock_gettime(CLOCK_REALTIME, &time)
        return Int64(time.tv_sec) * 1_000_000 + Int64(time.tv_nsec) / 1_000
    }
}
