import AccessoryModel

/// What the bridge is to do after an event: ``BridgeStateMachine`` decides, the I/O shell only runs these, in order.
public enum BridgeAction: Hashable, Sendable {
    /// Answers the telemetry being handled, on its hub's result topic (and response topic).
    case answer(Answer)
    /// Publishes an accessory's retained state.
    case publishState(AccessoryState)
    /// Sends a switch command to a playing device.
    case sendCommand(SwitchCommand)
    /// Asks a hub to send everything about an accessory again: its telemetry showed a gap.
    case requestRebirth(Rebirth)

    /// The answer to one telemetry message.
    public struct Answer: Hashable, Sendable {
        public var result: RequestOutcome.Result
        /// The accessory's state after the request; `nil` when the requesting hub may not see it (the accessory is
        /// unknown to it, or belongs to another hub).
        public var state: AccessoryState?

        public init(_ result: RequestOutcome.Result, state: AccessoryState?) {
            self.result = result
            self.state = state
        }
    }

    /// A rebirth request: the hub's count for `accessory` jumped from `lastSequence` to `receivedSequence`.
    public struct Rebirth: Hashable, Sendable {
        public var hub: HubID
        public var accessory: AccessoryID
        public var lastSequence: UInt64
        public var receivedSequence: UInt64

        public init(hub: HubID, accessory: AccessoryID, lastSequence: UInt64, receivedSequence: UInt64) {
            self.hub = hub
            self.accessory = accessory
            self.lastSequence = lastSequence
            self.receivedSequence = receivedSequence
        }
    }
}
