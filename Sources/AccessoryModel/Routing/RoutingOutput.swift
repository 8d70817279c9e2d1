/// What one routing transition produced.
public struct RoutingOutput: Hashable, Sendable {
    /// The commands to publish, in order.
    public var commands: [SwitchCommand] = []
    /// The accessories whose routed source or head-tracking session changed, each once;
    /// ``RoutingEngine/routedSource(for:)`` tells the new source.
    public var rerouted: [AccessoryID] = []
    /// When ``RoutingEngine/tick(at:)`` next has something to do, if ever.
    public var nextDeadline: Timestamp?
    /// After ``RoutingEngine/accessoryChanged(_:at:)``: the source now routed to that accessory. `nil` after the other
    /// transitions.
    public var routedSource: BluetoothAddress?
    /// In a cluster: which worn accessories list which shared devices, as it changed. The shell writes them before
    /// it runs this output's claims: rule 6 compares put-ons across slots in etcd's order, never by the members'
    /// clocks.
    public var worn: [WornListing] = []
    /// In a cluster: the shared devices this slot asks to hold before it routes them (see ``DeviceClaim``).
    public var claims: [DeviceClaim] = []
    /// In a cluster: the shared devices this slot held and no longer routes, after this output's commands.
    public var releases: [DeviceRelease] = []
    /// Rule 13: what became of head-tracking sessions, in order (an old host's invalidation before the new host's
    /// activation).
    public var headTracking: [HeadTrackingEvent] = []

    public init(
        commands: [SwitchCommand] = [], rerouted: [AccessoryID] = [],
        nextDeadline: Timestamp? = nil
    ) {
        self.commands = commands
        self.rerouted = rerouted
        self.nextDeadline = nextDeadline
    }

    mutating func noteRerouted(_ accessory: AccessoryID) {
        if !rerouted.contains(accessory) {
            rerouted.append(accessory)
        }
    }
}
