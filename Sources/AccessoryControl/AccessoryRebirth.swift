import AccessoryModel

/// What a hub has said of one of its accessories, and the bridge took, kept so that the hub can say it again where
/// it moves (``AccessoryHub/Options/followsLayout``): paired (its name, model and hardware), registered, and its
/// configuration. Built from the requests that succeeded, in their order; the C SDK's cache does the same.
struct AccessoryRebirth: Hashable, Sendable {
    private var pairing: AccessoryRequest?
    private var registered = false
    private var configuration = Configuration.empty

    /// Whether the accessory is paired (an unpaired one has nothing to say again).
    var isPaired: Bool { pairing != nil }

    /// Takes a request the bridge accepted.
    mutating func took(_ request: AccessoryRequest) {
        switch request {
        case .paired:
            // Paired again, its registration is invalidated until the next register; its configuration stays, as
            // the bridge keeps it (and the C SDK's cache).
            pairing = request
            registered = false
        case .unpaired:
            self = AccessoryRebirth()
        case .register(let capabilities, let spatial):
            registered = true
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
