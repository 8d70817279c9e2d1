import AccessoryModel
import Foundation

extension Audioaccessory_V1_AccessoryState {
    /// The published state of `accessory`, with the source the routing engine routes to it.
    public init(_ accessory: Accessory, routedSource: BluetoothAddress?) {
        self.init()
        accessoryID = accessory.id.rawValue
        hubID = accessory.hub.rawValue
        registration = .init(accessory.registration)
        name = accessory.name
        model = accessory.model
        hardwareCapabilities = .init(accessory.hardwareCapabilities)
        configuration = .init(accessory.configuration)
        self.routedSource = routedSource?.data ?? Data()
        lastSequence = accessory.lastSequence
        updatedAtUnixMs = accessory.updatedAt.unixMilliseconds
        stale = accessory.isStale
        diagnostics = accessory.diagnostics.map(\.description)
    }
}
