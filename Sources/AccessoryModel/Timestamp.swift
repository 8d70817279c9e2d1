/// A point in time, in milliseconds since the Unix epoch: the resolution of every `*_unix_ms` field on the wire.
///
/// The model and the routing engine never read a clock; every transition takes `now` as a `Timestamp`, which keeps
/// them deterministic and lets tests drive time.
public struct Timestamp: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// Milliseconds since 1970-01-01T00:00:00Z.
    public var unixMilliseconds: Int64

    public init(unixMilliseconds: Int64) {
        self.unixMilliseconds = unixMilliseconds
    }

    /// The epoch itself.
    public static let zero = Timestamp(unixMilliseconds: 0)

    public static func < (lhs: Self, rhs: Self) -> Bool { lhs.unixMilliseconds < rhs.unixMilliseconds }

    /// The timestamp `duration` later (whole milliseconds; saturating).
    public static func + (lhs: Self, rhs: Duration) -> Self {
        lhs.advanced(byMilliseconds: rhs.wholeMilliseconds)
    }

    /// The timestamp `milliseconds` later (saturating). Cheaper than adding a `Duration`, whose conversion divides
    /// 128-bit numbers: the model converts its policy's durations once and adds them with this.
    public func advanced(byMilliseconds milliseconds: Int64) -> Self {
        let (sum, overflow) = unixMilliseconds.addingReportingOverflow(milliseconds)
        return Timestamp(unixMilliseconds: overflow ? (milliseconds < 0 ? .min : .max) : sum)
    }

    /// The time from `rhs` to `lhs`.
    public static func - (lhs: Self, rhs: Self) -> Duration {
        .milliseconds(lhs.unixMilliseconds &- rhs.unixMilliseconds)
    }

    public var description: String { "\(unixMilliseconds) ms" }
}

extension Duration {
    /// The duration in whole milliseconds, rounded toward zero.
    public var wholeMilliseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds &* 1000 &+ attoseconds / 1_000_000_000_000_000
    }
}
