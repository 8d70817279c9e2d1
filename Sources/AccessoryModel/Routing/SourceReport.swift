/// What a playing device reported about itself (`SourceState`).
public struct SourceReport: Hashable, Sendable {
    /// Increasing per source; 0 means unsequenced (always applied).
    public var sequence: UInt64
    /// What it is doing; `nil` when the report does not say (the activity stays as it was).
    public var activity: Activity?
    /// The accessory it says it is routed to; `nil` when it does not say.
    public var routedAccessory: AccessoryID?
    /// The sequence of the last command the device applied; 0 when it does not say. A route reported before the
    /// device applied the engine's latest command is out of date, and ignored.
    public var lastCommandSequence: UInt64
    /// The epoch of that command (0 when it does not say, or a single bridge sent it).
    public var lastCommandEpoch: UInt64
    /// The person's Head Tracking setting on the device, for the accessory it plays on (rule 13); off when the device
    /// does not say.
    public var headTracking: Bool

    public init(
        sequence: UInt64 = 0, activity: Activity?, routedAccessory: AccessoryID? = nil, lastCommandSequence: UInt64 = 0,
        lastCommandEpoch: UInt64 = 0, headTracking: Bool = false
    ) {
        self.headTracking = headTracking
        self.sequence = sequence
        self.activity = activity
        self.routedAccessory = routedAccessory
        self.lastCommandSequence = lastCommandSequence
        self.lastCommandEpoch = lastCommandEpoch
    }

    /// The last command the device applied, when it says.
    public var lastCommand: CommandOrder? {
        lastCommandSequence == 0 ? nil : CommandOrder(epoch: lastCommandEpoch, sequence: lastCommandSequence)
    }
}
