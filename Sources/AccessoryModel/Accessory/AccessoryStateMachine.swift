#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// AudioAccessoryKit's `AccessoryControlDevice` semantics for one accessory, as pure state transitions.
///
/// Every transition takes the time as an argument and either changes the state and returns it, or throws an
/// ``AccessoryControlError`` and changes nothing. The machine never reads a clock and never performs I/O.
public struct AccessoryStateMachine: Sendable {
    /// Limits and timings of the model.
    public struct Policy: Hashable, Sendable {
        /// How long after registering a declared capability may go unreported before it gets a ``Diagnostic``.
        public var diagnosticsGracePeriod: Duration = .seconds(30)
        /// The longest accepted name or model, in UTF-8 bytes.
        public var maximumNameLength = 256

        public init() {}
    }

    public let id: AccessoryID
    public let policy: Policy
    /// The accessory, or `nil` while it was never paired.
    public private(set) var accessory: Accessory?

    /// A machine for an accessory that was never paired.
    public init(id: AccessoryID, policy: Policy = Policy()) {
        self.id = id
        self.policy = policy
        self.accessory = nil
    }

    /// A machine that continues from a known state.
    public init(restoring accessory: Accessory, policy: Policy = Policy()) {
        self.id = accessory.id
        self.policy = policy
        self.accessory = accessory
    }

    /// `AccessoryControlDevice.current(for:)`: the accessory's state; ``AccessoryControlError/invalidRequest(reason:)``
    /// when it was never paired.
    public func current() throws(AccessoryControlError) -> Accessory {
        guard let accessory else { throw .invalidRequest(reason: "accessory \(id) is not paired") }
        return accessory
    }

    /// When ``tick(at:)`` next has something to do, if ever.
    public var nextDeadline: Timestamp? {
        guard let accessory, accessory.registration == .registered, let registeredAt = accessory.registeredAt else {
            return nil
        }
        // Due while a declared capability is unreported and its diagnostic is not raised yet; once raised (or once
        // everything is reported) there is nothing left to wait for.
        let raised = accessory.diagnostics.contains { if case .hubOffline = $0 { false } else { true } }
        return !raised && hasUnreportedCapability(accessory) ? registeredAt + policy.diagnosticsGracePeriod : nil
    }

    /// Applies one request from `hub` and returns the new state, or throws and changes nothing.
    ///
    /// - Parameter sequence: the telemetry's sequence (0: unsequenced), recorded as ``Accessory/lastSequence``.
    @discardableResult
    public mutating func apply(
        _ request: AccessoryRequest,
        sequence: UInt64 = 0,
        from hub: HubID,
        at now: Timestamp
    ) throws(AccessoryControlError) -> Accessory {
        var next: Accessory
        switch request {
        case .paired(let name, let model, let hardware):
            next = try paired(name: name, model: model, hardware: hardware, hub: hub, now: now)
        case .unpaired:
            next = try knownAccessory(for: "unpairing")
            if next.registration != .unpaired {
                try Self.check(next, isPairedWith: hub)
                next.registration = .unpaired
                next.configuration = .empty
                next.registeredAt = nil
            }
        case .register(let capabilities):
            next = try registered(capabilities, hub: hub, now: now)
        case .update(let configuration):
            next = try updated(for: "updating", hub: hub) { $0 = configuration }
        case .placement(let placement):
            next = try updated(for: "placement updates", hub: hub) { $0.devicePlacement = placement }
        case .sources(let primary, let secondary):
            next = try updated(for: "source updates", hub: hub) {
                $0.primaryAudioSourceDeviceIdentifier = primary
                $0.secondaryAudioSourceDeviceIdentifier = secondary
            }
        }
        next.lastSequence = max(next.lastSequence, sequence)
        next.updatedAt = now
        // A hub that reports is alive: its data is current again.
        next.isStale = false
        next.diagnostics = diagnostics(of: next, at: now)
        accessory = next
        return next
    }

    /// Records that `hub` went offline or came back. Returns the new state when it changed this accessory.
    public mutating func hubAvailabilityChanged(_ hub: HubID, online: Bool, at now: Timestamp) -> Accessory? {
        guard var next = accessory, next.hub == hub, next.isStale == online else { return nil }
        next.isStale = !online
        next.updatedAt = now
        next.diagnostics = diagnostics(of: next, at: now)
        accessory = next
        return next
    }

    /// Lets time pass: raises the diagnostics that came due. Returns the new state when it changed.
    public mutating func tick(at now: Timestamp) -> Accessory? {
        guard var next = accessory else { return nil }
        let diagnostics = diagnostics(of: next, at: now)
        guard diagnostics != next.diagnostics else { return nil }
        next.diagnostics = diagnostics
        next.updatedAt = now
        accessory = next
        return next
    }

    // MARK: - Transitions

    private func paired(name: String, model: String, hardware: Capabilities, hub: HubID, now: Timestamp)
        throws(AccessoryControlError) -> Accessory
    {
        for (field, value) in [("name", name), ("model", model)] where value.utf8.count > policy.maximumNameLength {
            throw .invalidRequest(
                reason: "the \(field) is \(value.utf8.count) bytes long; the limit is \(policy.maximumNameLength)")
        }
        try Self.checkKnown(hardware, what: "hardware capabilities")
        guard var next = accessory else {
            return Accessory(
                id: id, hub: hub, registration: .paired, name: name, model: model,
                hardwareCapabilities: hardware, updatedAt: now)
        }
        switch next.registration {
        case .registered, .invalidated: next.registration = .invalidated
        case .paired, .unpaired: next.registration = .paired
        }
        next.hub = hub
        next.name = name
        next.model = model
        next.hardwareCapabilities = hardware
        return next
    }

    private func registered(_ capabilities: Capabilities, hub: HubID, now: Timestamp)
        throws(AccessoryControlError) -> Accessory
    {
        var next = try knownAccessory(for: "registering")
        guard next.registration != .unpaired else {
            throw .invalidRequest(reason: "accessory \(id) was unpaired; pair it again before registering")
        }
        try Self.check(next, isPairedWith: hub)
        guard !capabilities.isEmpty else {
            throw .invalidRequest(reason: "register needs at least one capability (.audioSwitching, .placement)")
        }
        try Self.checkKnown(capabilities, what: "capabilities")
        let missing = capabilities.subtracting(next.hardwareCapabilities)
        guard missing.isEmpty else {
            throw .accessoryNotCapable(
                reason: "accessory \(id) cannot register \(missing): its hardware capabilities are "
                    + "\(next.hardwareCapabilities)")
        }
        next.registration = .registered
        next.registeredAt = now
        next.configuration.deviceCapabilities = capabilities
        if !capabilities.contains(.placement) {
            next.configuration.devicePlacement = nil
        }
        return next
    }

    /// `update(_:)`: the registered configuration changed by `change`, when the result is valid.
    private func updated(
        for operation: String,
        hub: HubID,
        _ change: (inout Configuration) -> Void
    ) throws(AccessoryControlError) -> Accessory {
        var next = try registeredAccessory(for: operation, hub: hub)
        var configuration = next.configuration
        change(&configuration)
        let registered = next.configuration.deviceCapabilities
        guard configuration.deviceCapabilities == registered else {
            throw .invalidRequest(
                reason: "the configuration's capabilities \(configuration.deviceCapabilities) differ from the "
                    + "registered \(registered); register again to change them")
        }
        if let placement = configuration.devicePlacement, !registered.contains(.placement) {
            throw .accessoryNotCapable(
                reason: "placement \(placement) needs the .placement capability, which accessory \(id) did not "
                    + "register")
        }
        try Self.checkSources(
            primary: configuration.primaryAudioSourceDeviceIdentifier,
            secondary: configuration.secondaryAudioSourceDeviceIdentifier)
        // An empty identifier means "none", as nil does: keep one spelling.
        var normalized = configuration
        if normalized.primaryAudioSourceDeviceIdentifier?.isEmpty == true {
            normalized.primaryAudioSourceDeviceIdentifier = nil
        }
        if normalized.secondaryAudioSourceDeviceIdentifier?.isEmpty == true {
            normalized.secondaryAudioSourceDeviceIdentifier = nil
        }
        next.configuration = normalized
        return next
    }

    // MARK: - Preconditions

    /// The accessory, unless it was never paired.
    private func knownAccessory(for operation: String) throws(AccessoryControlError) -> Accessory {
        guard let accessory else {
            throw .invalidRequest(
                reason: "accessory \(id) is not paired; pair it through AccessorySetupKit before \(operation)")
        }
        return accessory
    }

    /// The accessory, when it is registered through `hub`.
    private func registeredAccessory(for operation: String, hub: HubID) throws(AccessoryControlError) -> Accessory {
        let accessory = try knownAccessory(for: operation)
        switch accessory.registration {
        case .registered:
            try Self.check(accessory, isPairedWith: hub)
            return accessory
        case .paired:
            try Self.check(accessory, isPairedWith: hub)
            throw .invalidRequest(reason: "accessory \(id) is not registered; register it before \(operation)")
        case .invalidated:
            try Self.check(accessory, isPairedWith: hub)
            throw .invalidated(
                reason: "the registration of accessory \(id) was invalidated when it was paired again; "
                    + "register it again")
        case .unpaired:
            throw .invalidated(
                reason: "accessory \(id) was unpaired, which ended its registration; pair and register it again")
        }
    }

    private static func check(_ accessory: Accessory, isPairedWith hub: HubID) throws(AccessoryControlError) {
        guard accessory.hub == hub else {
            throw .invalidRequest(reason: "accessory \(accessory.id) is paired with hub \(accessory.hub), not \(hub)")
        }
    }

    private static func checkKnown(_ capabilities: Capabilities, what: String) throws(AccessoryControlError) {
        let unknown = capabilities.subtracting(.all)
        guard unknown.isEmpty else {
            throw .invalidRequest(reason: "\(what) hold unknown capability bits 0x\(String(unknown.rawValue, radix: 16))")
        }
    }

    private static func checkSources(primary: Data?, secondary: Data?) throws(AccessoryControlError) {
        for (name, identifier) in [("primary", primary), ("secondary", secondary)] {
            if let identifier, !identifier.isEmpty, identifier.count != BluetoothAddress.byteCount {
                throw .invalidRequest(
                    reason: "the \(name)AudioSourceDeviceIdentifier must be empty or a 6-byte Bluetooth address, "
                        + "not \(identifier.count) bytes")
            }
        }
        let primary = primary.flatMap { BluetoothAddress(bytes: $0) }
        let secondary = secondary.flatMap { BluetoothAddress(bytes: $0) }
        if let secondary {
            guard let primary else {
                throw .invalidRequest(
                    reason: "a secondaryAudioSourceDeviceIdentifier (\(secondary)) needs a primary one")
            }
            guard primary != secondary else {
                throw .invalidRequest(
                    reason: "the primary and secondary audio sources are the same address, \(primary)")
            }
        }
    }

    // MARK: - Diagnostics

    private func hasUnreportedCapability(_ accessory: Accessory) -> Bool {
        let configuration = accessory.configuration
        return (configuration.deviceCapabilities.contains(.placement) && configuration.devicePlacement == nil)
            || (configuration.deviceCapabilities.contains(.audioSwitching)
                && configuration.primaryAudioSourceDeviceIdentifier == nil)
    }

    /// The diagnostics that hold for `accessory` at `now`.
    private func diagnostics(of accessory: Accessory, at now: Timestamp) -> [Diagnostic] {
        var diagnostics: [Diagnostic] = []
        if accessory.isStale {
            diagnostics.append(.hubOffline(accessory.hub))
        }
        let grace = policy.diagnosticsGracePeriod
        if accessory.registration == .registered, let registeredAt = accessory.registeredAt,
            now >= registeredAt + grace
        {
            let configuration = accessory.configuration
            if configuration.deviceCapabilities.contains(.placement), configuration.devicePlacement == nil {
                diagnostics.append(.placementNotReported(after: grace))
            }
            if configuration.deviceCapabilities.contains(.audioSwitching),
                configuration.primaryAudioSourceDeviceIdentifier == nil
            {
                diagnostics.append(.sourcesNotReported(after: grace))
            }
        }
        return diagnostics
    }
}
