/// Where a switch command stands among a playing device's commands: by the ownership epoch of the bridge that issued
/// it, then by its sequence. A command of a newer owner is newer whatever its sequence (owners' clocks differ); one
/// of an older owner, cut off since, is older whatever its sequence. A single bridge's commands all have epoch 0.
///
/// A device applies a command only when its order is above the last applied one's (``isAfter(_:)``), and reports
/// that order back (`SourceState.last_command_epoch`, `last_command_sequence`).
public struct CommandOrder: Hashable, Sendable, Comparable, CustomStringConvertible {
    public var epoch: UInt64
    public var sequence: UInt64

    public init(epoch: UInt64 = 0, sequence: UInt64) {
        self.epoch = epoch
        self.sequence = sequence
    }

    public static func < (lhs: CommandOrder, rhs: CommandOrder) -> Bool {
        (lhs.epoch, lhs.sequence) < (rhs.epoch, rhs.sequence)
    }

    /// `epoch 3, sequence 17`.
    public var description: String { "epoch \(epoch), sequence \(sequence)" }
}
