/// What the bridge publishes about an accessory: `AccessoryControlDevice.current(for:)` and its health
/// (``Accessory``), and the playing device the routing engine routes to it.
public struct AccessoryState: Hashable, Sendable {
    public var accessory: Accessory
    /// The source playing on it, if any.
    public var routedSource: BluetoothAddress?
    /// The ownership epoch of the bridge that published it: 0 for a single bridge (see ``SwitchCommand/epoch``).
    public var epoch: UInt64
    /// Its head-tracking session in force (rule 13), if any: a bridge that takes the accessory over takes the session
    /// over from here.
    public var headTracking: HeadTrackingSession?

    public init(
        _ accessory: Accessory, routedSource: BluetoothAddress?, epoch: UInt64 = 0,
        headTracking: HeadTrackingSession? = nil
    ) {
        self.accessory = accessory
        self.routedSource = routedSource
        self.epoch = epoch
        self.headTracking = headTracking
    }
}
