import AccessoryModel

/// What the bridge is to do after an event: ``BridgeStateMachine`` decides, the I/O shell only runs these, in order.
public enum BridgeAction: Hashable, Sendable {
    /// Answers the request being handled (telemetry, on its hub's result topic and response topic; controls, on the
    /// accessory's controls result topic); first publishes the state the request changed, when it did.
    case answer(Answer)
    /// Publishes the retained state of an accessory that no request being answered changed (another accessory whose
    /// route moved, a deadline, a hub's status), in the bridge's default format.
    case publishState(AccessoryState)
    /// Sends a switch command to a playing device.
    case sendCommand(SwitchCommand)
    /// Asks a hub to send everything about an accessory again: its telemetry showed a gap.
    case requestRebirth(Rebirth)
    /// In a cluster: an accessory of the slot lists this playing device now, and none did: read its state.
    case watchSource(BluetoothAddress)
    /// In a cluster: no accessory of the slot lists this playing device any more: stop reading its state.
    case unwatchSource(BluetoothAddress)
    /// In a cluster: a worn accessory lists a shared device now, or no longer: write or delete its key, before the
    /// claims that follow (docs/scale-out.md, "Shared devices").
    case noteWorn(WornListing)
    /// In a cluster: ask etcd to hold a shared device; the answer comes back as a ``SharedDeviceEvent``.
    case claimDevice(DeviceClaim)
    /// In a cluster: let go of a shared device the slot no longer routes (after the commands before this action).
    case releaseDevice(DeviceRelease)
    /// More states wait to be published again: once everything before went out, call
    /// ``BridgeStateMachine/publishingResumed(at:statesAtMost:)`` for the next batch.
    case continuePublishing
    /// Rule 13: tells an accessory's hub (and the session's host) what became of its head-tracking session.
    case headTracking(HeadTrackingEvent, hub: HubID)

    /// The answer to one request.
    public struct Answer: Hashable, Sendable {
        public var result: RequestOutcome.Result
        /// The accessory's state after the request; `nil` when the requester may not see it (the accessory is
        /// unknown to it, or belongs to another hub).
        public var state: AccessoryState?
        /// Whether the request changed the accessory: its retained ``state`` is published just before the answer, in
        /// the request's format (so that the one who asked reads it as it wrote), and the answer embeds it as
        /// published.
        public var publishesState: Bool

        public init(_ result: RequestOutcome.Result, state: AccessoryState?, publishesState: Bool = false) {
            precondition(!publishesState || state != nil, "a published state is shown in its answer")
            self.result = result
            self.state = state
            self.publishesState = publishesState
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
