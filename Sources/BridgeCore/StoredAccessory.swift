#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import AccessoryModel

/// An ``Accessory`` as ``AccessoryStore`` keeps it: 104 bytes where the value takes 184, once for every accessory.
///
/// Its hub is a number in the store's table of hubs, its audio sources are 48-bit addresses in 64-bit fields, its
/// capabilities a byte each, and what few accessories have (an error kept for a retry, diagnostics, a configuration
/// whose identifiers are not 6-byte addresses or that names a spatial rendering extension, a pinned source, a
/// capability beyond the first eight) lives beside
/// it in the store, marked by ``extras``. It converts back to the same ``Accessory``, field for field.
struct StoredAccessory: SlotIndexed, Sendable {
    /// What the store keeps beside an accessory, each in a table of its own.
    struct Extras: OptionSet, Sendable {
        let rawValue: UInt8
        static let lastError = Extras(rawValue: 1 << 0)
        static let diagnostics = Extras(rawValue: 1 << 1)
        static let configuration = Extras(rawValue: 1 << 2)
        static let pinnedSource = Extras(rawValue: 1 << 3)
        /// Both capability sets, when either does not fit in a byte.
        static let capabilities = Extras(rawValue: 1 << 4)
    }

    /// What the store kept beside an accessory, read back.
    struct Beside {
        var lastError: AccessoryControlError?
        var diagnostics: [Diagnostic] = []
        var configuration: Configuration?
        var pinnedSource: BluetoothAddress?
        var capabilities: WideCapabilities?
    }

    struct WideCapabilities: Sendable {
        var configuration: Capabilities
        var hardware: Capabilities
    }

    // Widest first, so that padding costs the least.
    let id: AccessoryID
    var name: String
    var model: String
    var lastSequence: UInt64
    var updatedAt: Timestamp
    /// ``Accessory/registeredAt`` in milliseconds, or ``none``.
    var registeredAt: Int64
    /// The configuration's source identifiers, or ``noAddress`` (meaningless when ``extras`` has `.configuration`).
    var primary: UInt64
    var secondary: UInt64
    /// The hub's number in the store's table of hubs.
    var hub: Int32
    /// The capabilities' raw values (meaningless when ``extras`` has `.capabilities`).
    var capabilities: UInt8
    var hardwareCapabilities: UInt8
    var placement: Placement?
    var registration: Registration
    var isStale: Bool
    var automaticSwitching: Bool
    /// Whether routing counts it as worn (``RoutingAccessory/isWorn``), for the store's count of worn accessories.
    var isWorn: Bool
    var extras: Extras

    static let none = Int64.min
    /// Above every 48-bit address: `BluetoothAddress(rawValue:)` reads it as none.
    static let noAddress = UInt64.max

    var indexKey: AccessoryID { id }

    /// `accessory`, its hub numbered `hub`; the extras it needs are marked, and the store keeps them.
    init(_ accessory: borrowing Accessory, hub: Int32) {
        id = accessory.id
        name = accessory.name
        model = accessory.model
        lastSequence = accessory.lastSequence
        updatedAt = accessory.updatedAt
        registeredAt = accessory.registeredAt?.unixMilliseconds ?? Self.none
        self.hub = hub
        let configuration = accessory.configuration
        capabilities = UInt8(truncatingIfNeeded: configuration.deviceCapabilities.rawValue)
        hardwareCapabilities = UInt8(truncatingIfNeeded: accessory.hardwareCapabilities.rawValue)
        placement = configuration.devicePlacement
        registration = accessory.registration
        isStale = accessory.isStale
        automaticSwitching = accessory.automaticSwitching
        isWorn = RoutingAccessory(accessory).isWorn
        extras = []
        if accessory.lastError != nil { extras.insert(.lastError) }
        if !accessory.diagnostics.isEmpty { extras.insert(.diagnostics) }
        if accessory.pinnedSource != nil { extras.insert(.pinnedSource) }
        if configuration.deviceCapabilities.rawValue > UInt8.max || accessory.hardwareCapabilities.rawValue > UInt8.max {
            extras.insert(.capabilities)
        }
        if configuration.spatialExtensionDescription == nil,
            let primary = Self.packed(configuration.primaryAudioSourceDeviceIdentifier),
            let secondary = Self.packed(configuration.secondaryAudioSourceDeviceIdentifier)
        {
            (self.primary, self.secondary) = (primary, secondary)
        } else {
            (primary, secondary) = (Self.noAddress, Self.noAddress)
            extras.insert(.configuration)
        }
    }

    /// The accessory, given its hub and what the store kept beside it.
    func accessory(hub: HubID, beside: Beside) -> Accessory {
        let capabilities =
            beside.capabilities
            ?? WideCapabilities(
                configuration: Capabilities(rawValue: UInt32(self.capabilities)),
                hardware: Capabilities(rawValue: UInt32(hardwareCapabilities)))
        return Accessory(
            id: id, hub: hub, registration: registration, name: name, model: model,
            hardwareCapabilities: capabilities.hardware,
            configuration: beside.configuration
                ?? Configuration(
                    devicePlacement: placement, deviceCapabilities: capabilities.configuration,
                    primaryAudioSourceDeviceIdentifier: Self.unpacked(primary),
                    secondaryAudioSourceDeviceIdentifier: Self.unpacked(secondary)),
            lastSequence: lastSequence, lastError: beside.lastError, updatedAt: updatedAt,
            registeredAt: registeredAt == Self.none ? nil : Timestamp(unixMilliseconds: registeredAt),
            isStale: isStale, diagnostics: beside.diagnostics, automaticSwitching: automaticSwitching,
            pinnedSource: beside.pinnedSource)
    }

    /// A source identifier as an address in 64 bits: ``noAddress`` for none, `nil` when it is not 6 bytes (the
    /// configuration is then kept as it is).
    private static func packed(_ identifier: Data?) -> UInt64? {
        guard let identifier else { return noAddress }
        return BluetoothAddress(bytes: identifier)?.rawValue
    }

    private static func unpacked(_ packed: UInt64) -> Data? {
        BluetoothAddress(rawValue: packed)?.data
    }
}
