import AccessoryModel

/// Drives a ``RoutingEngine`` the way the bridge does: keeps each accessory's routing view, applies one change at a
/// time at a test-controlled time, and returns the commands as compact, comparable values.
struct RoutingHarness {
    /// A command without its id, sequence and time: what a rule test compares.
    struct Issued: Hashable, CustomStringConvertible {
        var action: SwitchCommand.Action
        var source: BluetoothAddress
        var accessory: AccessoryID
        var reason: SwitchCommand.Reason

        static func route(_ source: BluetoothAddress, _ accessory: AccessoryID, _ reason: SwitchCommand.Reason) -> Self {
            Issued(action: .routeToAccessory, source: source, accessory: accessory, reason: reason)
        }
        static func pause(_ source: BluetoothAddress, _ accessory: AccessoryID, _ reason: SwitchCommand.Reason) -> Self {
            Issued(action: .pause, source: source, accessory: accessory, reason: reason)
        }
        static func resume(_ source: BluetoothAddress, _ accessory: AccessoryID, _ reason: SwitchCommand.Reason) -> Self {
            Issued(action: .resume, source: source, accessory: accessory, reason: reason)
        }
        static func release(_ source: BluetoothAddress, _ accessory: AccessoryID, _ reason: SwitchCommand.Reason) -> Self {
            Issued(action: .release, source: source, accessory: accessory, reason: reason)
        }

        var description: String { "\(action) \(source) \(accessory) \(reason)" }
    }

    var engine: RoutingEngine
    var views: [AccessoryID: RoutingAccessory] = [:]
    /// The source pinned to each accessory (rule 12), kept across changes of its connections.
    var pins: [AccessoryID: BluetoothAddress] = [:]
    var now = Fixture.start
    /// Every command issued so far, in order.
    var log: [SwitchCommand] = []
    /// The output of the last transition.
    var last = RoutingOutput()

    init(resumeWindow: Duration = .seconds(15), epoch: UInt64 = 0, sessionKey: SessionKey = SessionKey(0, 0)) {
        var policy = RoutingEngine.Policy()
        policy.resumeWindow = resumeWindow
        engine = RoutingEngine(policy: policy, instanceID: "test", epoch: epoch, sessionKey: sessionKey)
    }

    mutating func advance(_ duration: Duration) {
        now = now + duration
    }

    /// A registered accessory (by default with `.audioSwitching` and `.placement`).
    @discardableResult
    mutating func register(
        _ id: AccessoryID, capabilities: Capabilities = .all, placement: Placement? = nil,
        sources: [BluetoothAddress] = []
    ) -> [Issued] {
        change(
            RoutingAccessory(
                id: id, registration: .registered, capabilities: capabilities, placement: placement,
                sources: SourcePair(sources)))
    }

    @discardableResult
    mutating func place(_ id: AccessoryID, _ placement: Placement?) -> [Issued] {
        var view = views[id]!
        view.placement = placement
        return change(view)
    }

    @discardableResult
    mutating func connect(_ id: AccessoryID, _ sources: [BluetoothAddress]) -> [Issued] {
        let view = views[id]!
        return change(
            RoutingAccessory(
                id: id, registration: view.registration, capabilities: view.capabilities, placement: view.placement,
                sources: SourcePair(sources), isStale: view.isStale, automaticSwitching: view.automaticSwitching,
                pinnedSource: pins[id]))
    }

    @discardableResult
    mutating func registration(_ id: AccessoryID, _ registration: Registration) -> [Issued] {
        var view = views[id]!
        view.registration = registration
        return change(view)
    }

    @discardableResult
    mutating func stale(_ id: AccessoryID, _ isStale: Bool) -> [Issued] {
        var view = views[id]!
        view.isStale = isStale
        return change(view)
    }

    @discardableResult
    mutating func capabilities(_ id: AccessoryID, _ capabilities: Capabilities) -> [Issued] {
        var view = views[id]!
        view.capabilities = capabilities
        return change(view)
    }

    /// The person's controls (rule 12): automatic switching and a pinned source.
    @discardableResult
    mutating func controls(_ id: AccessoryID, automatic: Bool = true, pinned: BluetoothAddress? = nil) -> [Issued] {
        let view = views[id]!
        pins[id] = pinned
        return change(
            RoutingAccessory(
                id: id, registration: view.registration, capabilities: view.capabilities, placement: view.placement,
                sources: view.connected, isStale: view.isStale, automaticSwitching: automatic, pinnedSource: pinned))
    }

    @discardableResult
    mutating func change(_ view: RoutingAccessory) -> [Issued] {
        views[view.id] = view
        return record(engine.accessoryChanged(view, at: now))
    }

    @discardableResult
    mutating func source(
        _ source: BluetoothAddress, _ activity: Activity?, sequence: UInt64 = 0, routedTo: AccessoryID? = nil,
        applied: CommandOrder? = nil, headTracking: Bool = false
    ) -> [Issued] {
        record(
            engine.sourceReported(
                SourceReport(
                    sequence: sequence, activity: activity, routedAccessory: routedTo,
                    lastCommandSequence: applied?.sequence ?? 0, lastCommandEpoch: applied?.epoch ?? 0,
                    headTracking: headTracking),
                from: source, at: now))
    }

    /// What etcd said about a shared device (a cluster's slot).
    @discardableResult
    mutating func shared(_ event: SharedDeviceEvent) -> [Issued] {
        record(engine.sharedDevice(event, at: now))
    }

    @discardableResult
    mutating func tick() -> [Issued] {
        record(engine.tick(at: now))
    }

    private mutating func record(_ output: RoutingOutput) -> [Issued] {
        last = output
        log += output.commands
        return output.commands.map {
            Issued(action: $0.action, source: $0.source, accessory: $0.accessoryID, reason: $0.reason)
        }
    }
}
