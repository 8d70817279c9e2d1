#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// One thing a hub asks of an accessory: the events of `AccessoryTelemetry`.
public enum AccessoryRequest: Hashable, Sendable {
    /// AccessorySetupKit pairing finished: the accessory is known, with what its hardware can do.
    case paired(name: String, model: String, hardwareCapabilities: Capabilities)
    /// The accessory was removed: its registration ends and its configuration is cleared.
    case unpaired
    /// `AccessoryControlDevice.register(accessory, configuration)`: its capabilities, and (iOS 27) its spatial
    /// rendering extension.
    case register(Capabilities, spatialExtensionDescription: AudioComponentDescription? = nil)
    /// `AccessoryControlDevice.update(_:)` with a full configuration.
    case update(Configuration)
    /// An update of the placement alone.
    case placement(Placement?)
    /// An update of the audio source identifiers alone.
    case sources(primary: Data?, secondary: Data?)

    /// The name of the request, for logs and metrics.
    public var name: String {
        switch self {
        case .paired: "paired"
        case .unpaired: "unpaired"
        case .register: "register"
        case .update: "update"
        case .placement: "placement"
        case .sources: "sources"
        }
    }

    /// A pairing: the accessory's birth.
    public var isPairing: Bool {
        if case .paired = self { true } else { false }
    }
}
