#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// An accessory's configuration: AudioAccessoryKit's `AccessoryControlDevice.Configuration`.
public struct Configuration: Hashable, Sendable {
    /// The capabilities the accessory registered.
    public var deviceCapabilities: Capabilities
    /// Where the accessory is; `nil` when unknown (always `nil` without ``Capabilities/placement``).
    public var devicePlacement: Placement?
    /// The Bluetooth address (6 bytes) of the first audio source the accessory is connected to.
    public var primaryAudioSourceDeviceIdentifier: Data?
    /// The Bluetooth address (6 bytes) of the second audio source; never set without a primary.
    public var secondaryAudioSourceDeviceIdentifier: Data?
    /// The accessory's spatial audio rendering extension (iOS 27); only with ``Capabilities/audioSpatialization``.
    public var spatialExtensionDescription: AudioComponentDescription?

    public init(
        devicePlacement: Placement? = nil,
        deviceCapabilities: Capabilities,
        primaryAudioSourceDeviceIdentifier: Data? = nil,
        secondaryAudioSourceDeviceIdentifier: Data? = nil,
        spatialExtensionDescription: AudioComponentDescription? = nil
    ) {
        self.devicePlacement = devicePlacement
        self.deviceCapabilities = deviceCapabilities
        self.primaryAudioSourceDeviceIdentifier = primaryAudioSourceDeviceIdentifier
        self.secondaryAudioSourceDeviceIdentifier = secondaryAudioSourceDeviceIdentifier
        self.spatialExtensionDescription = spatialExtensionDescription
    }

    /// No capabilities, no placement, no sources.
    public static let empty = Configuration(deviceCapabilities: [])

    /// The audio sources, primary first, as addresses. Only meaningful once the configuration was validated.
    public var audioSources: [BluetoothAddress] {
        [primaryAudioSourceDeviceIdentifier, secondaryAudioSourceDeviceIdentifier].compactMap { data in
            data.flatMap { BluetoothAddress(bytes: $0) }
        }
    }
}
