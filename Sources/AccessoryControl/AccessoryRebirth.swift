import AccessoryModel

/// What a hub has said of one of its accessories, and the bridge took, kept so that the hub can say it again: where
/// it moves (``AccessoryHub/Options/followsLayout``), and when the bridge asks (a `RebirthRequest`, after a gap in
/// its telemetry): paired (its name, model and hardware), registered, and its configuration. Built from the requests
/// that succeeded, in their order, or learned from the bridge's state of it; the C SDK's cache does the same.
struct AccessoryRebirth: Hashable, Sendable {
    private var pairing: AccessoryRequest?
    private var registered = false
    private var configuration = Configuration.empty
    /// The sequence of the last pairing or registration the bridge took (0: not known, learned from its state).
    private(set) var birthSequence: UInt64 = 0

    init() {}

    /// What the bridge's state of the accessory says it is: a hub that restarted learns it from the first result
    /// about it (the bridge has its pairing). `nil` for an accessory that is not paired.
    init?(learning state: AccessoryState) {
        let accessory = state.accessory
        guard accessory.registration != .unpaired else { return nil }
        pairing = .paired(
            name: accessory.name, model: accessory.model, hardwareCapabilities: accessory.hardwareCapabilities)
        registered = accessory.registration == .registered
        configuration = accessory.configuration
    }

    /// Whether the accessory is paired (an unpaired one has nothing to say again).
    var isPaired: Bool { pairing != nil }

    /// Takes a request the bridge accepted, with its sequence (0: not known).
    mutating func took(_ request: AccessoryRequest, sequence: UInt64 = 0) {
        switch request {
        case .paired:
            // Paired again, its registration is invalidated until the next register; its configuration stays, as
            // the bridge keeps it (and the C SDK's cache).
            pairing = request
            registered = false
            birthSequence = sequence
        case .unpaired:
            self = AccessoryRebirth()
        case .register(let capabilities, let spatial):
            registered = true
            birthSequence = sequence
            configuration.deviceCapabilities = capabilities
            configuration.spatialExtensionDescription = spatial
        case .update(let new):
            configuration = new
        case .placement(let placement):
            configuration.devicePlacement = placement
        case .sources(let primary, let secondary):
            configuration.primaryAudioSourceDeviceIdentifier = primary
            configuration.secondaryAudioSourceDeviceIdentifier = secondary
        }
    }

    /// What a move asks first (a registered accessory's whole configuration as an update): the new root may know the
    /// accessory already (a reshard moved its state), and pairing it again would invalidate its registration and
    /// release its route for a moment. Refused, ``requests`` follow. `nil`: the accessory is not registered.
    var probe: AccessoryRequest? {
        pairing != nil && registered ? .update(configuration) : nil
    }

    /// The answer to a `RebirthRequest` whose last sequence before the gap is `lastSequence`: the ``probe`` when the
    /// bridge took the pairing and registration before the gap (it missed updates only; pairing again would release
    /// the accessory's route for a moment), else the whole ``requests``. A probe refused brings the whole too.
    func answer(lastSequence: UInt64) -> (probe: AccessoryRequest?, requests: [AccessoryRequest]) {
        (lastSequence >= birthSequence ? probe : nil, requests)
    }

    /// The requests that make the accessory what it was, in order: paired; then, once registered, registered with its
    /// capabilities and spatial extension, and its whole configuration.
    var requests: [AccessoryRequest] {
        guard let pairing else { return [] }
        guard registered else { return [pairing] }
        return [
            pairing,
            .register(
                configuration.deviceCapabilities, spatialExtensionDescription: configuration.spatialExtensionDescription),
            .update(configuration),
        ]
    }
}
