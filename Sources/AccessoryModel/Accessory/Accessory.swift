/// What the bridge knows about one accessory: `AccessoryControlDevice.current(for:)` plus its pairing, hub and
/// health. A value; ``AccessoryStateMachine`` is the only thing that changes it.
public struct Accessory: Hashable, Sendable {
    // Stored in this order (the 16-byte fields first, then 8, then the 4-byte one in the optional error's tail, the
    // one-byte ones last) so that padding costs the least: 184 bytes, not 208. The bridge's store keeps a compact form
    // of it (BridgeCore's StoredAccessory, 120 bytes); this is the value the transitions work on.
    public let id: AccessoryID
    /// The hub the accessory is paired with.
    public internal(set) var hub: HubID
    public internal(set) var name: String
    public internal(set) var model: String
    /// The registered configuration (`.empty` until registered, and again once unpaired).
    public internal(set) var configuration: Configuration
    /// The sequence of the last telemetry processed from its hub, applied or failed (0: none carried a sequence).
    /// The one place a sequence is kept; ``sequences`` reads and records it by ``SequenceTracker``'s rule.
    public internal(set) var lastSequence: UInt64
    /// When the state last changed.
    public internal(set) var updatedAt: Timestamp
    /// Warnings about common integration mistakes, in a stable order.
    public internal(set) var diagnostics: [Diagnostic]
    /// The outcome of the telemetry numbered ``lastSequence``: `nil` when it succeeded (or nothing carried a
    /// sequence), else its error. Kept so that a hub retrying that request, even after a restart of the bridge, gets
    /// its original outcome.
    public internal(set) var lastError: AccessoryControlError?
    /// What the hardware can do, as pairing reported it.
    public internal(set) var hardwareCapabilities: Capabilities
    /// When the accessory last registered; diagnostics are judged from here.
    public internal(set) var registeredAt: Timestamp?
    /// The only source the person lets the bridge route to it (see ``AccessoryControls``).
    public internal(set) var pinnedSource: BluetoothAddress?
    public internal(set) var registration: Registration
    /// The hub is offline: the state may be out of date and the accessory takes no part in routing.
    public internal(set) var isStale: Bool
    /// The person's controls (``AccessoryControls``): whether the bridge switches audio for it on its own
    /// (AudioAccessoryKit's "automatic").
    public internal(set) var automaticSwitching: Bool

    /// Creates an accessory in any state, for restoring a state published earlier.
    public init(
        id: AccessoryID,
        hub: HubID,
        registration: Registration,
        name: String = "",
        model: String = "",
        hardwareCapabilities: Capabilities,
        configuration: Configuration = .empty,
        lastSequence: UInt64 = 0,
        lastError: AccessoryControlError? = nil,
        updatedAt: Timestamp,
        registeredAt: Timestamp? = nil,
        isStale: Bool = false,
        diagnostics: [Diagnostic] = [],
        automaticSwitching: Bool = true,
        pinnedSource: BluetoothAddress? = nil
    ) {
        self.id = id
        self.hub = hub
        self.registration = registration
        self.name = name
        self.model = model
        self.hardwareCapabilities = hardwareCapabilities
        self.configuration = configuration
        self.lastSequence = lastSequence
        self.lastError = lastError
        self.updatedAt = updatedAt
        self.registeredAt = registeredAt
        self.isStale = isStale
        self.diagnostics = diagnostics
        self.automaticSwitching = automaticSwitching
        self.pinnedSource = pinnedSource
    }
}

extension Accessory {
    /// The hub whose telemetry may change this accessory: the one that paired it, until it unpairs it. An unpaired
    /// accessory belongs to no hub: any hub may pair it (that is how an accessory moves to another hub).
    public var owner: HubID? { registration == .unpaired ? nil : hub }

    /// The order of its hub's telemetry, over ``lastSequence``.
    var sequences: SequenceTracker {
        get { SequenceTracker(last: lastSequence) }
        set { lastSequence = newValue.last }
    }
}
