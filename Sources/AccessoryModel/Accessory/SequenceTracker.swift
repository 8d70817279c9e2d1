/// Telemetry order per (hub, accessory), after Sparkplug B: each message carries an increasing sequence, so the bridge
/// can tell a repeat (MQTT redelivery, a hub retrying) from a message it missed.
///
/// - `0` means unsequenced: always applied, and it changes nothing here.
/// - A pairing is the accessory's birth: always applied, and its sequence restarts the count (a hub that restarted
///   and lost its counter starts with a pairing).
/// - A sequence not above the last one processed is a duplicate: it changes nothing and repeats its first outcome.
/// - A sequence beyond the next one reveals a gap: it is applied, and the hub is asked to send everything again.
///
/// "Processed" includes requests that failed: a failure consumes its sequence (the hub did send it) without changing
/// the accessory otherwise.
///
/// This is the rule; the number itself is kept in one place, ``Accessory/lastSequence``, which is published with the
/// accessory's state and so survives a restart of the bridge.
public struct SequenceTracker: Hashable, Sendable {
    public enum Verdict: Hashable, Sendable {
        case unsequenced
        /// The first sequence seen, or the one after the last.
        case next
        /// A pairing: applied whatever its sequence.
        case birth
        /// Above the next expected one: the messages in `missing` never arrived.
        case gap(missing: ClosedRange<UInt64>)
        /// Not above the last sequence processed.
        case duplicate(last: UInt64)
    }

    /// The last sequence processed (0: none yet).
    public private(set) var last: UInt64

    public init(last: UInt64 = 0) {
        self.last = last
    }

    /// What a message with `sequence` is; `isBirth` for a pairing.
    public func verdict(for sequence: UInt64, isBirth: Bool) -> Verdict {
        if sequence == 0 { return .unsequenced }
        if isBirth { return .birth }
        // Never `last + 1`: after 2⁶⁴ − 1 every sequence but a birth is a duplicate, not an overflow.
        if last == 0 || sequence - 1 == last { return .next }
        if sequence <= last { return .duplicate(last: last) }
        // Here last + 1 < sequence ≤ UInt64.max.
        return .gap(missing: (last + 1)...(sequence - 1))
    }

    /// Records that the message with `sequence` was processed (applied or failed).
    public mutating func record(_ sequence: UInt64, isBirth: Bool) {
        guard sequence != 0 else { return }
        last = isBirth ? sequence : max(last, sequence)
    }
}
