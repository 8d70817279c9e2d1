#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import AccessoryModel

/// An ``Accessory`` as ``AccessoryStore`` keeps it: 120 bytes where the value takes 184, once for every accessory.
///
/// Its hub is a number in the store's table of hubs, its audio sources and pinned source are 48-bit addresses in
/// 64-bit fields, and what few accessories have (an error kept for a retry, diagnostics, a configuration whose
/// identifiers are not 6-byte addresses) lives beside it in the store, marked by ``extras``. It converts back to the
/// same ``Accessory``, field for field.
struct StoredAccessory: SlotIndexed, Sendable {
    /// What the store keeps beside an accessory.
    struct Extras: OptionSet, Sendable {
        let rawValue: UInt8
        static let lastError = Extras(rawValue: 1 << 0)
        static let diagnostics = Extras(rawValue: 1 << 1)
        static let configuration = Extras(rawValue: 1 << 2)
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
    var pinnedSource: UInt64
    /// The hub's number in the store's table of hubs.
    var hub: Int32
    var capabilities: Capabilities
    var hardwareCapabilities: Capabilities
    var placement: Placement?
    var registration: Registration
    var isStale: Bool
    var automaticSwitching: Bool
    var extras: Extras

    static let none = Int64.min
    /// Above every 48-bit address: `BluetoothAddress(rawValue:)` reads it as none.
    static let noAddress = UInt64.max

    var indexKey: AccessoryID { id }

    /// `accessory`, its hub numbered `hub`; the extras it needs are marked, and the store keeps them.
    init(_ accessory: Accessory, hub: Int32) {
        id = accessory.id
        name = accessory.name
        model = accessory.model
        lastSequence = accessory.lastSequence
        updatedAt = accessory.updatedAt
        registeredAt = accessory.registeredAt?.unixMilliseconds ?? Self.none
        self.hub = hub
        capabilities = accessory.configuration.deviceCapabilities
        hardwareCapabilities = accessory.hardwareCapabilities
        placement = accessory.configuration.devicePlacement
        registration = accessory.registration
        isStale = accessory.isStale
        automaticSwitching = accessory.automaticSwitching
        pinnedSource = accessory.pinnedSource?.rawValue ?? Self.noAddress
        extras = []
        if accessory.lastError != nil { extras.insert(.lastError) }
        if !accessory.diagnostics.isEmpty { extras.insert(.diagnostics) }
        let configuration = accessory.configuration
        if let primary = Self.packed(configuration.primaryAudioSourceDeviceIdentifier),
            let secondary = Self.packed(configuration.secondaryAudioSourceDeviceIdentifier)
        {
            (self.primary, self.secondary) = (primary, secondary)
        } else {
            (primary, secondary) = (Self.noAddress, Self.noAddress)
            extras.insert(.configuration)
        }
    }

    /// The accessory, given its hub and the extras the store kept for it.
    func accessory(
        hub: HubID, lastError: AccessoryControlError?, diagnostics: [Diagnostic], configuration: Configuration?
    ) -> Accessory {
        Accessory(
            id: id, hub: hub, registration: registration, name: name, model: model,
            hardwareCapabilities: hardwareCapabilities,
            configuration: configuration
                ?? Configuration(
                    devicePlacement: placement, deviceCapabilities: capabilities,
                    primaryAudioSourceDeviceIdentifier: Self.unpacked(primary),
                    secondaryAudioSourceDeviceIdentifier: Self.unpacked(secondary)),
            lastSequence: lastSequence, lastError: lastError, updatedAt: updatedAt,
            registeredAt: registeredAt == Self.none ? nil : Timestamp(unixMilliseconds: registeredAt),
            isStale: isStale, diagnostics: diagnostics, automaticSwitching: automaticSwitching,
            pinnedSource: BluetoothAddress(rawValue: pinnedSource))
    }

    /// Its routing view, without making the ``Accessory`` (nil when ``extras`` has `.configuration`: the
    /// identifiers are then kept beside it).
    var routingView: RoutingAccessory? {
        guard !extras.contains(.configuration) else { return nil }
        return RoutingAccessory(
            id: id, registration: registration, capabilities: capabilities, placement: placement,
            sources: SourcePair(
                primary: BluetoothAddress(rawValue: primary), secondary: BluetoothAddress(rawValue: secondary)),
            isStale: isStale, automaticSwitching: automaticSwitching,
            pinnedSource: BluetoothAddress(rawValue: pinnedSource))
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
