/// A worn accessory lists a shared device (`isWorn`), or no longer does (taken off, the device unlisted or no longer
/// shared): the shell writes or deletes the listing's key, whose revision orders the put-ons in etcd (rule 6 compares
/// put-ons across slots in etcd's order, never by the members' clocks).
public struct WornListing: Hashable, Sendable {
    public var accessory: AccessoryID
    public var source: BluetoothAddress
    public var isWorn: Bool

    public init(accessory: AccessoryID, source: BluetoothAddress, isWorn: Bool) {
        self.accessory = accessory
        self.source = source
        self.isWorn = isWorn
    }
}
