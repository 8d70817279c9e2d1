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
    }

    /// The model configuration; empty identifiers read as `nil`. Lengths and consistency are the model's to judge.
    func configuration() throws(AccessoryControlError) -> Configuration {
        Configuration(
            devicePlacement: try devicePlacement.placement(field: "device_placement"),
            deviceCapabilities: try deviceCapabilities.capabilities(field: "device_capabilities"),
            primaryAudioSourceDeviceIdentifier: primaryAudioSourceDeviceIdentifier.nilWhenEmpty,
            secondaryAudioSourceDeviceIdentifier: secondaryAudioSourceDeviceIdentifier.nilWhenEmpty)
    }
}

extension Data {
    /// `nil` for empty data: "absent" on the wire.
    var nilWhenEmpty: Data? { isEmpty ? nil : self }
}
