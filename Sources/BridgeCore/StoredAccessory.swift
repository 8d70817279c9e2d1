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
/// whose identifiers are not 6-byte addresses, a pinned source, a capability this model does not know) lives beside it
/// in the store (``Beside``), marked by ``hasBeside``. It converts back to the same ``Accessory``, field for field.
struct StoredAccessory: SlotIndexed, Sendable {
    /// What the store keeps beside an accessory that needs it.
    struct Beside: Sendable {
        var lastError: AccessoryControlError?
        var diagnostics: [Diagnostic] = []
        /// The configuration, when its source identifiers are not 6-byte addresses or none.
        var configuration: Configuration?
        var pinnedSource: BluetoothAddress?
        /// Both capability sets, when either does not fit in a byte.
        var capabilities: (configuration: Capabilities, hardware: Capabilities)?
    }

    // Widest first, so that padding costs the least.
    let id: AccessoryID
    var name: String
    var model: String
    var lastSequence: UInt64
    var updatedAt: Timestamp
    /// ``Accessory/registeredAt`` in milliseconds, or ``none``.
    var registeredAt: Int64
    /// The configuration's source identifiers, or ``noAddress`` (meaningless when ``Beside/configuration`` is set).
    var primary: UInt64
    var secondary: UInt64
    /// The hub's number in the store's table of hubs.
    var hub: Int32
    /// The capabilities' raw values (meaningless when ``Beside/capabilities`` is set).
    var capabilities: UInt8
    var hardwareCapabilities: UInt8
    var placement: Placement?
    var registration: Registration
    var isStale: Bool
    var automaticSwitching: Bool
    /// The store keeps a ``Beside`` for it.
    var hasBeside: Bool

    static let none = Int64.min
    /// Above every 48-bit address: `BluetoothAddress(rawValue:)` reads it as none.
    static let noAddress = UInt64.max

    var indexKey: AccessoryID { id }

    /// `accessory`, its hub numbered `hub`, and what the store keeps beside it, if anything.
    static func split(_ accessory: Accessory, hub: Int32) -> (StoredAccessory, Beside?) {
        var beside = Beside()
        var needed = false
        let configuration = accessory.configuration
        let (primary, secondary): (UInt64, UInt64)
        if let first = packed(configuration.primaryAudioSourceDeviceIdentifier),
            let second = packed(configuration.secondaryAudioSourceDeviceIdentifier)
        {
            (primary, secondary) = (first, second)
        } else {
            (primary, secondary) = (noAddress, noAddress)
            beside.configuration = configuration
            needed = true
        }
        let (capabilities, hardware) = (configuration.deviceCapabilities, accessory.hardwareCapabilities)
        if capabilities.rawValue > UInt8.max || hardware.rawValue > UInt8.max {
            beside.capabilities = (capabilities, hardware)
            needed = true
        }
        if let error = accessory.lastError {
            beside.lastError = error
            needed = true
        }
        if !accessory.diagnostics.isEmpty {
            beside.diagnostics = accessory.diagnostics
            needed = true
        }
        if let pinned = accessory.pinnedSource {
            beside.pinnedSource = pinned
            needed = true
        }
        let stored = StoredAccessory(
            id: accessory.id, name: accessory.name, model: accessory.model, lastSequence: accessory.lastSequence,
            updatedAt: accessory.updatedAt, registeredAt: accessory.registeredAt?.unixMilliseconds ?? none,
            primary: primary, secondary: secondary, hub: hub,
            capabilities: UInt8(truncatingIfNeeded: capabilities.rawValue),
            hardwareCapabilities: UInt8(truncatingIfNeeded: hardware.rawValue),
            placement: configuration.devicePlacement, registration: accessory.registration,
            isStale: accessory.isStale, automaticSwitching: accessory.automaticSwitching, hasBeside: needed)
        return (stored, needed ? beside : nil)
    }

    /// The accessory, given its hub and what the store kept beside it.
    func accessory(hub: HubID, beside: Beside?) -> Accessory {
        let beside = beside ?? Beside()
        let (capabilities, hardware) =
            beside.capabilities
            ?? (Capabilities(rawValue: UInt32(self.capabilities)), Capabilities(rawValue: UInt32(hardwareCapabilities)))
        return Accessory(
            id: id, hub: hub, registration: registration, name: name, model: model,
            hardwareCapabilities: hardware,
            configuration: beside.configuration
                ?? Configuration(
                    devicePlacement: placement, deviceCapabilities: capabilities,
                    primaryAudioSourceDeviceIdentifier: Self.unpacked(primary),
                    secondaryAudioSourceDeviceIdentifier: Self.unpacked(secondary)),
            lastSequence: lastSequence, lastError: beside.lastError, updatedAt: updatedAt,
            registeredAt: registeredAt == Self.none ? nil : Timestamp(unixMilliseconds: registeredAt),
            isStale: isStale, diagnostics: beside.diagnostics, automaticSwitching: automaticSwitching,
            pinnedSource: beside.pinnedSource)
    }

    /// Its routing view, without making the ``Accessory`` (nil when the store keeps something beside it: the view
    /// is then made from the accessory).
    var routingView: RoutingAccessory? {
        guard !hasBeside else { return nil }
        return RoutingAccessory(
            id: id, registration: registration, capabilities: Capabilities(rawValue: UInt32(capabilities)),
            placement: placement,
            sources: SourcePair(
                primary: BluetoothAddress(rawValue: primary), secondary: BluetoothAddress(rawValue: secondary)),
            isStale: isStale, automaticSwitching: automaticSwitching)
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
