import AccessoryModel

/// An accessory paired through a hub: this library's stand-in for AccessorySetupKit's `ASAccessory`, which is what
/// AudioAccessoryKit's calls take. Get one from ``AccessoryHub/pair(_:name:model:hardwareCapabilities:)``.
public struct PairedAccessory: Hashable, Sendable, CustomStringConvertible {
    public let id: AccessoryID
    /// The hub it was paired through.
    public let hub: AccessoryHub

    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.id == rhs.id && lhs.hub === rhs.hub }
    public func hash(into hasher: inout Hasher) { hasher.combine(id) }

    public var description: String { "\(id) (hub \(hub.hubID))" }
}
