/// What became of one telemetry message: ``AccessoryStateMachine/process(_:sequence:from:at:)``'s answer.
public struct RequestOutcome: Hashable, Sendable {
    public enum Result: Hashable, Sendable {
        /// The request was applied: the accessory changed.
        case applied
        /// The request failed with AudioAccessoryKit's error; nothing changed but the sequence it consumed.
        case failed(AccessoryControlError)
        /// The sequence was processed before (MQTT redelivery, a hub's retry): nothing changed now.
        case duplicate(Original)

        /// The error the requester is answered with, if any: a failure's, or a repeat's original one.
        public var error: AccessoryControlError? {
            switch self {
            case .applied, .duplicate(.succeeded), .duplicate(.notKept): nil
            case .failed(let error), .duplicate(.failed(let error)): error
            }
        }
    }

    /// The outcome a repeated sequence had the first time.
    public enum Original: Hashable, Sendable {
        case succeeded
        case failed(AccessoryControlError)
        /// An older sequence than the last one processed (`last`): its outcome is no longer kept.
        case notKept(last: UInt64)
    }

    public var result: Result
    /// The sequences the message shows missing (a gap in the hub's count), if any.
    public var gap: ClosedRange<UInt64>?
    /// The accessory's state changed, its sequence and last outcome included: publish it.
    public var stateChanged: Bool
    /// The requesting hub is the accessory's (or, for an unpaired one, was): its answer may show the state. Any other
    /// hub's answer shows nothing of it.
    public var requesterOwns: Bool

    public init(result: Result, gap: ClosedRange<UInt64>? = nil, stateChanged: Bool, requesterOwns: Bool) {
        self.result = result
        self.gap = gap
        self.stateChanged = stateChanged
        self.requesterOwns = requesterOwns
    }

}
