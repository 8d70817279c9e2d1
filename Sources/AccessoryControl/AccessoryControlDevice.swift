import AccessoryModel

/// AudioAccessoryKit's `AccessoryControlDevice`, over MQTT: register an accessory's capabilities (or, as iOS 27, a
/// configuration with its spatial audio extension), read its current configuration, and update it; failures throw ``Error`` with AudioAccessoryKit's cases and the bridge's reason.
/// The methods throw untyped errors, as AudioAccessoryKit's do, so its documented code (`catch let error as
/// AccessoryControlDevice.Error`) reads the same.
///
/// ```swift
/// try await AccessoryControlDevice.register(accessory, [.audioSwitching, .placement])
///
/// let device = try AccessoryControlDevice.current(for: accessory)
/// var configuration = device.configuration
/// configuration.devicePlacement = .onHead
/// try await device.update(configuration)
/// ```
public final class AccessoryControlDevice: Sendable {
    public typealias Configuration = AccessoryModel.Configuration
    public typealias Capabilities = AccessoryModel.Capabilities
    public typealias Placement = AccessoryModel.Placement
    /// `.accessoryNotCapable`, `.invalidRequest`, `.invalidated`, `.unknown`, each with the bridge's reason.
    /// A request the bridge does not answer in time throws `.unknown`.
    public typealias Error = AccessoryControlError

    /// The accessory this device controls.
    public let accessory: PairedAccessory
    /// The configuration when this device was obtained (``current(for:)``) or last updated.
    public let configuration: Configuration

    init(accessory: PairedAccessory, configuration: Configuration) {
        self.accessory = accessory
        self.configuration = configuration
    }

    /// Registers the accessory with the system and activates `capabilities`. Call it after pairing.
    public static func register(_ accessory: PairedAccessory, _ capabilities: Capabilities) async throws {
        try await accessory.hub.register(accessory, capabilities)
    }

    /// Registers the accessory with the system and activates its configured capabilities (iOS 27): with
    /// `.audioSpatialization`, the configuration may name the accessory's spatial audio rendering extension
    /// (`spatialExtensionDescription`; without that capability it is refused with `.accessoryNotCapable`). A placement
    /// or sources in the configuration are applied too.
    ///
    /// ```swift
    /// let configuration = AccessoryControlDevice.Configuration(
    ///     deviceCapabilities: [.audioSwitching, .placement, .audioSpatialization, .headTracking],
    ///     spatialExtensionDescription: AudioComponentDescription(
    ///         componentType: 0xaaf, componentSubType: 0xc0f, componentManufacturer: 0xb05e))
    /// try await AccessoryControlDevice.register(accessory, configuration)
    /// ```
    public static func register(_ accessory: PairedAccessory, _ configuration: Configuration) async throws {
        try await accessory.hub.register(accessory, configuration)
    }

    /// The accessory's current configuration, as the bridge last reported it to this hub.
    ///
    /// Throws `.invalidRequest` when the accessory is not registered (or this hub has no report of it yet) and
    /// `.invalidated` when its registration was invalidated or it was unpaired.
    public static func current(for accessory: PairedAccessory) throws -> AccessoryControlDevice {
        guard let state = accessory.hub.lastKnownState(of: accessory.id) else {
            throw Error.invalidRequest(
                reason: "accessory \(accessory.id) has no state from the bridge on this hub yet; pair it")
        }
        switch state.accessory.registration {
        case .registered:
            return AccessoryControlDevice(accessory: accessory, configuration: state.accessory.configuration)
        case .paired:
            throw Error.invalidRequest(reason: "accessory \(accessory.id) is not registered; register it first")
        case .invalidated:
            throw Error.invalidated(
                reason: "the registration of accessory \(accessory.id) was invalidated; register it again")
        case .unpaired:
            throw Error.invalidated(reason: "accessory \(accessory.id) was unpaired")
        }
    }

    /// Applies a full configuration. Its capabilities must be the registered ones.
    public func update(_ configuration: Configuration) async throws {
        try await accessory.hub.update(configuration, for: accessory)
    }
}
