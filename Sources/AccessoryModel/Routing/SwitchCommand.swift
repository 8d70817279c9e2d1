/// A command the routing engine sends to a playing device.
public struct SwitchCommand: Hashable, Sendable, CustomStringConvertible {
    /// What the device is asked to do.
    public enum Action: Hashable, Sendable, CaseIterable, CustomStringConvertible {
        /// Route audio output to the accessory (replacing any earlier route).
        case routeToAccessory
        /// Pause playback now, and stop routing to the accessory.
        case pause
        /// Resume the playback an earlier ``pause`` stopped.
        case resume
        /// Stop routing to the accessory without pausing.
        case release

        public var description: String {
            switch self {
            case .routeToAccessory: "ROUTE_TO_ACCESSORY"
            case .pause: "PAUSE"
            case .resume: "RESUME"
            case .release: "RELEASE"
            }
        }
    }

    /// The routing rule that issued a command.
    public enum Reason: Hashable, Sendable, CaseIterable, CustomStringConvertible {
        /// Rule 1: the accessory stopped taking part (stale, or registered without `.audioSwitching`).
        case accessoryIneligible
        /// Rule 4: the accessory was put on.
        case putOn
        /// Rule 5: the accessory was taken off.
        case takenOff
        /// Rule 6: a candidate source became active (it is routed; the source it displaces is paused).
        case sourceActivated
        /// Rule 7: the routed source disappeared from the accessory's identifiers.
        case sourceDisconnected
        /// Rule 8: the accessory was unpaired, re-paired or invalidated.
        case registrationEnded
        /// Rule 11: a call ended; what it displaced is routed back and resumed (the call's source is released).
        case interruptionEnded
        /// Rule 12: the person's controls changed (a pinned source excludes the others).
        case controlsChanged

        public var description: String {
            switch self {
            case .accessoryIneligible: "ACCESSORY_INELIGIBLE"
            case .putOn: "PUT_ON"
            case .takenOff: "TAKEN_OFF"
            case .sourceActivated: "SOURCE_ACTIVATED"
            case .sourceDisconnected: "SOURCE_DISCONNECTED"
            case .registrationEnded: "REGISTRATION_ENDED"
            case .interruptionEnded: "INTERRUPTION_ENDED"
            case .controlsChanged: "CONTROLS_CHANGED"
            }
        }
    }

    /// Unique for every command: `{engine instance}-{source}-{sequence}`.
    public var id: String
    /// Increasing per source.
    public var sequence: UInt64
    /// The playing device the command is for.
    public var source: BluetoothAddress
    public var accessoryID: AccessoryID
    public var action: Action
    public var reason: Reason
    public var issuedAt: Timestamp
    /// The ownership epoch of the bridge that issued it: 0 for a single bridge; in a cluster, the epoch of the slot's
    /// owner (docs/scale-out.md). A device applies a command only when its ``order`` is above the last one's.
    public var epoch: UInt64

    public init(
        id: String, sequence: UInt64, source: BluetoothAddress, accessoryID: AccessoryID, action: Action,
        reason: Reason, issuedAt: Timestamp, epoch: UInt64 = 0
    ) {
        self.id = id
        self.sequence = sequence
        self.source = source
        self.accessoryID = accessoryID
        self.action = action
        self.reason = reason
        self.issuedAt = issuedAt
        self.epoch = epoch
    }

    /// Where the command stands among a device's commands: by epoch, then by sequence.
    public var order: CommandOrder { CommandOrder(epoch: epoch, sequence: sequence) }

    /// `PAUSE 12:34:56:78:9A:BC from hp1 (TAKEN_OFF)`.
    public var description: String {
        let preposition = action == .routeToAccessory ? "to" : action == .resume ? "on" : "from"
        return "\(action) \(source) \(preposition) \(accessoryID) (\(reason))"
    }
}
