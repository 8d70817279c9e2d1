/// What the routing engine needs to know of an accessory: a snapshot taken after each change.
public struct RoutingAccessory: Hashable, Sendable {
    // The widest fields first: 48 bytes rather than 64, for a copy the engine keeps of every accessory that takes part.
    public var id: AccessoryID
    /// The sources the accessory is connected to, primary first.
    public var connected: SourcePair
    /// ``pinnedSource``'s 48 bits, or ``SourcePair``'s value for none (8 bytes, where an optional address takes 16).
    private var pinned: UInt64
    public var capabilities: Capabilities
    public var registration: Registration
    public var placement: Placement?
    public var isStale: Bool
    /// The person lets the bridge switch audio for it (rule 12).
    public var automaticSwitching: Bool

    public init(
        id: AccessoryID, registration: Registration, capabilities: Capabilities, placement: Placement? = nil,
        sources: SourcePair = [], isStale: Bool = false, automaticSwitching: Bool = true,
        pinnedSource: BluetoothAddress? = nil
    ) {
        self.id = id
        self.registration = registration
        self.capabilities = capabilities
        self.placement = placement
        self.connected = sources
        self.pinned = pinnedSource?.rawValue ?? UInt64.max
        self.isStale = isStale
        self.automaticSwitching = automaticSwitching
    }

    /// The source the person pinned (rule 12), if any.
    public var pinnedSource: BluetoothAddress? { BluetoothAddress(rawValue: pinned) }

    /// Its candidate sources: the connected ones, or only the pinned one (rule 12): none while the pinned one is not
    /// connected.
    public var sources: SourcePair {
        guard let pinnedSource else { return connected }
        return connected.contains(pinnedSource) ? [pinnedSource] : []
    }

    /// The routing view of an accessory's state.
    public init(_ accessory: borrowing Accessory) {
        self.init(
            id: accessory.id,
            registration: accessory.registration,
            capabilities: accessory.configuration.deviceCapabilities,
            placement: accessory.configuration.devicePlacement,
            sources: SourcePair(
                primary: accessory.configuration.primaryAudioSourceDeviceIdentifier.flatMap { BluetoothAddress(bytes: $0) },
                secondary: accessory.configuration.secondaryAudioSourceDeviceIdentifier.flatMap {
                    BluetoothAddress(bytes: $0)
                }),
            isStale: accessory.isStale, automaticSwitching: accessory.automaticSwitching,
            pinnedSource: accessory.pinnedSource)
    }

    /// Rule 1: only registered accessories with `.audioSwitching`, not stale, take part.
    public var takesPart: Bool {
        registration == .registered && capabilities.contains(.audioSwitching) && !isStale
    }

    /// Rule 2: worn when in ear, on head or over the ear; without `.placement`, worn while it has a source.
    /// Only an accessory that takes part counts as worn.
    public var isWorn: Bool {
        guard takesPart else { return false }
        return capabilities.contains(.placement) ? placement?.isWorn == true : !sources.isEmpty
    }
}
