/// A head-tracking session (AudioAccessoryKit iOS 27's `AudioAccessoryHeadTracking.Session`), as routing rule 13
/// keeps it: the accessory's IMU frames go from its hub straight to the **host**, the playing device routed to it,
/// whose Spatial Audio renderer takes them. No frame passes through the bridge.
public struct HeadTrackingSession: Hashable, Sendable {
    public var accessory: AccessoryID
    /// 16 random bytes, not guessable: every frame of the session carries it.
    public var id: HeadTrackingSessionID
    /// The playing device whose renderer takes the frames.
    public var host: BluetoothAddress
    /// The person's Head Tracking setting on the host (`isHeadTrackingActive`): the hub samples only while it is on.
    public var isHeadTrackingActive: Bool
    /// The order of the last news of the session: hubs and hosts drop older ones (an older owner's).
    public var order: CommandOrder

    public init(
        accessory: AccessoryID, id: HeadTrackingSessionID, host: BluetoothAddress, isHeadTrackingActive: Bool,
        order: CommandOrder
    ) {
        self.accessory = accessory
        self.id = id
        self.host = host
        self.isHeadTrackingActive = isHeadTrackingActive
        self.order = order
    }

    /// Stable for the accessory across its sessions (`restorationID`).
    public var restorationID: String { "aab:\(accessory)" }
}

/// A session's id: 16 bytes, unguessable (``SessionKey``).
public struct HeadTrackingSessionID: Hashable, Sendable, CustomStringConvertible {
    public var high: UInt64
    public var low: UInt64

    public init(high: UInt64, low: UInt64) {
        self.high = high
        self.low = low
    }

    /// From its 16 bytes, most significant first; `nil` for any other length.
    public init?(bytes: some Collection<UInt8>) {
        guard bytes.count == 16 else { return nil }
        var high: UInt64 = 0
        var low: UInt64 = 0
        for (index, byte) in bytes.enumerated() {
            if index < 8 { high = high << 8 | UInt64(byte) } else { low = low << 8 | UInt64(byte) }
        }
        self.init(high: high, low: low)
    }

    /// Its 16 bytes, most significant first.
    public var bytes: [UInt8] {
        (0..<8).map { UInt8(truncatingIfNeeded: high >> (56 - 8 * $0)) }
            + (0..<8).map { UInt8(truncatingIfNeeded: low >> (56 - 8 * $0)) }
    }

    /// 32 lowercase hex digits.
    public var description: String {
        bytes.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
    }
}

/// What rule 13 says of a session: it is established with a host, the person's setting on the host changed, or it
/// ended; with why.
public struct HeadTrackingEvent: Hashable, Sendable {
    public enum Kind: String, Hashable, Sendable, CaseIterable, CustomStringConvertible {
        /// `Handler.activate(for:)`.
        case activated
        /// `Handler.headTrackingStateDidChange(isActive:)`.
        case stateChanged = "state_changed"
        /// `Handler.invalidate()`: nothing more may be sent in it.
        case invalidated

        public var description: String { rawValue }
    }

    /// Why (one reason per way a session starts, changes and ends).
    public enum Reason: String, Hashable, Sendable, CaseIterable {
        /// Activated: worn and routed to the host.
        case routed
        /// Invalidated: the route moved to another playing device, whose session comes next.
        case routeMoved
        /// Invalidated: taken off.
        case takenOff
        /// Invalidated: the route ended without another (paused, released).
        case unrouted
        /// Invalidated: unpaired, re-paired, or registered again without `.headTracking`.
        case registrationEnded
        /// Invalidated: no longer takes part (its hub offline past its grace, automatic switching off).
        case ineligible
        /// State changed: the person's Head Tracking setting on the host.
        case switchChanged
        /// Invalidated: the bridge shut down.
        case shutdown
    }

    public var kind: Kind
    public var reason: Reason
    /// The session as it is after the event (as it was, for an invalidation).
    public var session: HeadTrackingSession
    public var issuedAt: Timestamp

    public init(_ kind: Kind, _ session: HeadTrackingSession, reason: Reason, at issuedAt: Timestamp) {
        self.kind = kind
        self.session = session
        self.reason = reason
        self.issuedAt = issuedAt
    }
}
