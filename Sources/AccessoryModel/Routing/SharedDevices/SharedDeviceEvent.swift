/// What a slot's shell learns of its shared devices from etcd: its own requests' answers, and the watch of the other
/// slots' holders and listers (docs/scale-out.md, "Shared devices").
public enum SharedDeviceEvent: Hashable, Sendable {
    /// Whether accessories of another slot list the device too.
    case shared(BluetoothAddress, Bool)
    /// The answer to this slot's listing of the device: etcd has it now, and says whether another slot lists it too.
    case listed(BluetoothAddress, shared: Bool)
    /// This slot's claim won: it holds the device, at this epoch (the holder key's revision).
    case claimed(BluetoothAddress, epoch: UInt64)
    /// This slot's claim lost to the holder of this epoch.
    case claimRefused(BluetoothAddress, holderEpoch: UInt64)
    /// This slot's rule 6 claim stood back: another slot's accessory listing the device was put on later, and that
    /// slot takes it. The decision is dropped; the device stays free to this slot's rules.
    case claimWithdrawn(BluetoothAddress)
    /// Another slot took the device, at this epoch.
    case heldElsewhere(BluetoothAddress, epoch: UInt64)
    /// The slot that held the device let it go.
    case releasedElsewhere(BluetoothAddress)
}

/// What a slot asks etcd about its playing devices: the shell hands these over as it runs its actions, and etcd's
/// answers come back as ``SharedDeviceEvent``s (docs/scale-out.md, "Shared devices").
public enum SharedDeviceRequest: Hashable, Sendable {
    /// The slot lists the device now: add the slot to its listers, and say whether another slot lists it too.
    case listed(BluetoothAddress)
    /// The slot no longer lists the device.
    case unlisted(BluetoothAddress)
    /// A worn accessory lists a shared device now, or no longer (rule 6's order of put-ons, in etcd).
    case worn(WornListing)
    case claim(DeviceClaim)
    case release(DeviceRelease)
}
