/// What the bridge publishes about an accessory: `AccessoryControlDevice.current(for:)` and its health
/// (``Accessory``), and the playing device the routing engine routes to it.
public struct AccessoryState: Hashable, Sendable {
    public var accessory: Accessory
    /// The source playing on it, if any.
    public var routedSource: BluetoothAddress?

    public init(_ accessory: Accessory, routedSource: BluetoothAddress?) {
        self.accessory = accessory
        self.routedSource = routedSource
    }
}
