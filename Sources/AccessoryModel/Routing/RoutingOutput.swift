/// What one routing transition produced.
public struct RoutingOutput: Hashable, Sendable {
    /// The commands to publish, in order.
    public var commands: [SwitchCommand] = []
    /// The accessories whose routed source changed, each once; ``RoutingEngine/routedSource(for:)`` tells the new one.
    public var rerouted: [AccessoryID] = []
    /// When ``RoutingEngine/tick(at:)`` next has something to do, if ever.
    public var nextDeadline: Timestamp?
    /// After ``RoutingEngine/accessoryChanged(_:at:)``: the source now routed to that accessory. `nil` after the other
    /// transitions.
    public var routedSource: BluetoothAddress?

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
