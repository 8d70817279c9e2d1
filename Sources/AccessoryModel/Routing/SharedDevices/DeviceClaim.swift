/// A slot asks etcd to hold a shared device before it routes it (docs/scale-out.md, "Shared devices"): the engine
/// keeps the decision pending, and the answer (``SharedDeviceEvent``) runs it again.
public struct DeviceClaim: Hashable, Sendable, CustomStringConvertible {
    /// What a claim may take, after the rule that makes it. Who may take a device from whom is decided from this
    /// (`SlotDeviceRequests` in the Cluster module), against the holder etcd has.
    public enum Kind: String, Hashable, Sendable {
        /// Rule 4 (put on): the device, from whoever holds it, as one bridge routes a put-on's best candidate
        /// wherever it plays.
        case takeOver
        /// Rule 6 (the device became active while unrouted): only for the most recently worn accessory listing it,
        /// in etcd's order of the worn listings, and only from nobody or from a holder whose accessory was put on
        /// earlier. When another slot's accessory was put on later, this slot stands back: that slot takes it.
        case mostRecentlyWorn
        /// The other rules (a free device for a worn, free accessory; a route the slot had): only from nobody.
        case ifFree
    }

    public var source: BluetoothAddress
    /// The accessory that is to have it.
    public var accessory: AccessoryID
    public var kind: Kind

    public init(source: BluetoothAddress, accessory: AccessoryID, kind: Kind) {
        self.source = source
        self.accessory = accessory
        self.kind = kind
    }

    public var description: String { "\(source) for \(accessory) (\(kind))" }
}

/// A shared device the slot held and no longer routes: the shell deletes its holder key if it still has this epoch.
public struct DeviceRelease: Hashable, Sendable {
    public var source: BluetoothAddress
    /// The holder key's revision when this slot claimed it.
    public var epoch: UInt64

    public init(source: BluetoothAddress, epoch: UInt64) {
        self.source = source
        self.epoch = epoch
    }
}
