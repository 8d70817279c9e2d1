import AccessoryModel
import Foundation

extension Audioaccessory_V1_Configuration {
    /// The wire form of `configuration`; absent values are empty.
    init(_ configuration: Configuration) {
        self.init()
        deviceCapabilities = .init(configuration.deviceCapabilities)
        devicePlacement = .init(configuration.devicePlacement)
        primaryAudioSourceDeviceIdentifier = configuration.primaryAudioSourceDeviceIdentifier ?? Data()
        secondaryAudioSourceDeviceIdentifier = configuration.secondaryAudioSourceDeviceIdentifier ?? Data()
        if let description = configuration.spatialExtensionDescription {
            spatialExtensionDescription = .init(description)
        }
    }

    /// The model configuration; empty identifiers read as `nil`. Lengths and consistency are the model's to judge.
    func configuration() throws(AccessoryControlError) -> Configuration {
        Configuration(
            devicePlacement: try devicePlacement.placement(field: "device_placement"),
            deviceCapabilities: try deviceCapabilities.capabilities(field: "device_capabilities"),
            primaryAudioSourceDeviceIdentifier: primaryAudioSourceDeviceIdentifier.nilWhenEmpty,
            secondaryAudioSourceDeviceIdentifier: secondaryAudioSourceDeviceIdentifier.nilWhenEmpty,
            spatialExtensionDescription: hasSpatialExtensionDescription ? spatialExtensionDescription.model : nil)
    }
}

extension Audioaccessory_V1_AudioComponentDescription {
    init(_ description: AudioComponentDescription) {
        self.init()
        componentType = description.componentType
        componentSubType = description.componentSubType
        componentManufacturer = description.componentManufacturer
        componentFlags = description.componentFlags
        componentFlagsMask = description.componentFlagsMask
    }

    var model: AudioComponentDescription {
        AudioComponentDescription(
            componentType: componentType, componentSubType: componentSubType,
            componentManufacturer: componentManufacturer, componentFlags: componentFlags,
            componentFlagsMask: componentFlagsMask)
    }
}

extension Data {
    /// `nil` for empty data: "absent" on the wire.
    var nilWhenEmpty: Data? { isEmpty ? nil : self }
}
