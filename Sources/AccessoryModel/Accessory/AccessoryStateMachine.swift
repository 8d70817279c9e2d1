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
    /// `policy.diagnosticsGracePeriod` in milliseconds, converted once (see ``Timestamp/advanced(byMilliseconds:)``).
    private let gracePeriod: Int64
    /// The accessory, or `nil` while it was never paired.
    public private(set) var accessory: Accessory?

    /// A machine for an accessory that was never paired.
    public init(id: AccessoryID, policy: Policy = Policy()) {
        self.id = id
        self.policy = policy
        self.gracePeriod = policy.diagnosticsGracePeriod.wholeMilliseconds
        self.accessory = nil
    }

    /// A machine that continues from a known state.
    public init(restoring accessory: Accessory, policy: Policy = Policy()) {
        self.id = accessory.id
        self.policy = policy
        self.gracePeriod = policy.diagnosticsGracePeriod.wholeMilliseconds
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
        let raised = accessory.diagnostics.contains {
            switch $0 {
            case .placementNotReported, .sourcesNotReported: true
            case .hubOffline, .reported: false
            }
        }
        return !raised && hasUnreportedCapability(accessory) ? registeredAt.advanced(byMilliseconds: gracePeriod) : nil
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
        // Each transition checks everything before it changes anything, then changes the accessory in place.
        switch request {
        case .paired(let name, let model, let hardware):
            try pair(name: name, model: model, hardware: hardware, hub: hub, now: now)
        case .unpaired:
            try unpair(hub: hub)
        case .register(let capabilities, let spatialExtension):
            try register(capabilities, spatialExtension: spatialExtension, hub: hub, now: now)
        case .update(let configuration):
            try update(for: "updating", hub: hub) { $0 = configuration }
        case .placement(let placement):
            try update(for: "placement updates", hub: hub) { $0.devicePlacement = placement }
        case .sources(let primary, let secondary):
            try update(for: "source updates", hub: hub) {
                $0.primaryAudioSourceDeviceIdentifier = primary
                $0.secondaryAudioSourceDeviceIdentifier = secondary
            }
        }
        // Every transition leaves an accessory behind. A pairing is the accessory's birth: its sequence restarts the
        // count (see SequenceTracker).
        if sequence != 0 {
            accessory!.sequences.record(sequence, isBirth: request.isPairing)
            accessory!.lastError = nil
        }
        accessory!.updatedAt = now
        // A hub that reports is alive: its data is current again.
        accessory!.isStale = false
        refreshDiagnostics(at: now)
        return accessory!
    }

    /// Processes one telemetry message from `hub`: its request (or the error that answers it, when the message could
    /// not be read as one), its sequence, and who may send it. Never throws: the outcome says what happened.
    ///
    /// - Only the hub the accessory belongs to (``Accessory/owner``) changes it; a pairing from any hub brings an
    ///   unknown or unpaired accessory to life. A message from another hub changes nothing, and its answer shows none
    ///   of the accessory's state.
    /// - The sequence is checked against the accessory's hub's count (``SequenceTracker``): a repeat changes nothing
    ///   and reports the original outcome when it is the last one processed; a gap is reported and the message applied.
    /// - A request that fails consumes its sequence (the hub did send it) and is recorded as the last outcome, so that
    ///   its retry gets the same answer.
    public mutating func process(
        _ request: Result<AccessoryRequest, AccessoryControlError>, sequence: UInt64, from hub: HubID,
        at now: Timestamp
    ) -> RequestOutcome {
        // Sequences are the hub's count for this accessory: only its own hub's are checked and recorded.
        let counts = accessory?.hub == hub && sequence != 0
        var gap: ClosedRange<UInt64>?
        if counts, let accessory {
            let isBirth = (try? request.get())?.isPairing ?? false
            switch accessory.sequences.verdict(for: sequence, isBirth: isBirth) {
            case .duplicate(let last):
                let original: RequestOutcome.Original =
                    sequence == last ? accessory.lastError.map { .failed($0) } ?? .succeeded : .notKept(last: last)
                return RequestOutcome(result: .duplicate(original), stateChanged: false, requesterOwns: true)
            case .gap(let missing):
                gap = missing
            case .unsequenced, .next, .birth:
                break
            }
        }
        do throws(AccessoryControlError) {
            try apply(request.get(), sequence: sequence, from: hub, at: now)
            return RequestOutcome(result: .applied, gap: gap, stateChanged: true, requesterOwns: true)
        } catch {
            guard counts else {
                return RequestOutcome(result: .failed(error), stateChanged: false, requesterOwns: accessory?.hub == hub)
            }
            // A failure consumes its sequence and is remembered as the last outcome: part of the published state.
            accessory!.sequences.record(sequence, isBirth: false)
            accessory!.lastError = error
            accessory!.updatedAt = now
            return RequestOutcome(result: .failed(error), gap: gap, stateChanged: true, requesterOwns: true)
        }
    }

    /// The person's controls, from home automation (any hub's accessory: they are the person's, not the hub's).
    /// Fails when the accessory is not paired; returns the new state.
    @discardableResult
    public mutating func setControls(_ controls: AccessoryControls, at now: Timestamp) throws(AccessoryControlError)
        -> Accessory
    {
        guard let accessory, accessory.registration != .unpaired else {
            throw .invalidRequest(reason: "accessory \(id) is not paired; its controls exist while it is")
        }
        if let automatic = controls.automaticSwitching {
            self.accessory!.automaticSwitching = automatic
        }
        switch controls.pin {
        case nil: break
        case .automatic?: self.accessory!.pinnedSource = nil
        case .source(let source)?: self.accessory!.pinnedSource = source
        }
        self.accessory!.updatedAt = now
        return self.accessory!
    }

    /// Records that `hub` went offline or came back. Returns the new state when it changed this accessory.
    public mutating func hubAvailabilityChanged(_ hub: HubID, online: Bool, at now: Timestamp) -> Accessory? {
        guard let accessory, accessory.hub == hub, accessory.isStale == online else { return nil }
        self.accessory!.isStale = !online
        self.accessory!.updatedAt = now
        refreshDiagnostics(at: now)
        return self.accessory
    }

    /// Lets time pass: raises the diagnostics that came due. Returns the new state when it changed.
    public mutating func tick(at now: Timestamp) -> Accessory? {
        guard accessory != nil, refreshDiagnostics(at: now) else { return nil }
        accessory!.updatedAt = now
        return accessory
    }

    // MARK: - Transitions

    private mutating func pair(name: String, model: String, hardware: Capabilities, hub: HubID, now: Timestamp)
        throws(AccessoryControlError)
    {
        try checkLength(of: name, field: "name")
        try checkLength(of: model, field: "model")
        guard let registration = accessory?.registration else {
            accessory = Accessory(
                id: id, hub: hub, registration: .paired, name: name, model: model,
                hardwareCapabilities: hardware, updatedAt: now)
            return
        }
        // Another hub may pair it only once its hub unpaired it: then it moves, and its count starts over.
        if let owner = accessory!.owner, owner != hub { throw ownedByAnotherHub(hub) }
        switch registration {
        case .registered, .invalidated: accessory!.registration = .invalidated
        case .paired, .unpaired: accessory!.registration = .paired
        }
        accessory!.hub = hub
        accessory!.name = name
        accessory!.model = model
        accessory!.hardwareCapabilities = hardware
    }

    private mutating func unpair(hub: HubID) throws(AccessoryControlError) {
        let accessory = try knownAccessory(for: "unpairing", by: hub)
        // Unpairing again is harmless: there is nothing left to end.
        guard accessory.registration != .unpaired else { return }
        self.accessory!.registration = .unpaired
        self.accessory!.configuration = .empty
        self.accessory!.registeredAt = nil
        // The person's controls belonged to this pairing.
        self.accessory!.automaticSwitching = true
        self.accessory!.pinnedSource = nil
    }

    private mutating func register(
        _ capabilities: Capabilities, spatialExtension: AudioComponentDescription?, hub: HubID, now: Timestamp
    ) throws(AccessoryControlError) {
        let accessory = try knownAccessory(for: "registering", by: hub)
        guard accessory.registration != .unpaired else {
            throw .invalidRequest(reason: "accessory \(id) was unpaired; pair it again before registering")
        }
        guard !capabilities.isEmpty else {
            throw .invalidRequest(reason: "register needs at least one capability (.audioSwitching, .placement)")
        }
        // Capabilities this version does not know are kept (a later hub's), as long as the hardware has them.
        let missing = capabilities.subtracting(accessory.hardwareCapabilities)
        guard missing.isEmpty else {
            throw .accessoryNotCapable(
                reason: "accessory \(id) cannot register \(missing): its hardware capabilities are "
                    + "\(accessory.hardwareCapabilities)")
        }
        try Self.checkSpatialExtension(spatialExtension, registered: capabilities, id: id)
        self.accessory!.registration = .registered
        self.accessory!.registeredAt = now
        self.accessory!.configuration.deviceCapabilities = capabilities
        self.accessory!.configuration.spatialExtensionDescription = spatialExtension
        if !capabilities.contains(.placement) {
            self.accessory!.configuration.devicePlacement = nil
        }
    }

    /// `update(_:)`: the registered configuration changed by `change`, when the result is valid.
    private mutating func update(
        for operation: String,
        hub: HubID,
        _ change: (inout Configuration) -> Void
    ) throws(AccessoryControlError) {
        try checkRegistered(for: operation, hub: hub)
        var configuration = accessory!.configuration
        let registered = configuration.deviceCapabilities
        change(&configuration)
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
        try Self.checkSpatialExtension(configuration.spatialExtensionDescription, registered: registered, id: id)
        // An empty identifier means "none", as nil does: keep one spelling.
        let primary = try Self.checkedSource(configuration.primaryAudioSourceDeviceIdentifier, name: "primary")
        let secondary = try Self.checkedSource(configuration.secondaryAudioSourceDeviceIdentifier, name: "secondary")
        if let secondary {
            guard let primary else {
                throw .invalidRequest(
                    reason: "a secondaryAudioSourceDeviceIdentifier (\(secondary)) needs a primary one")
            }
            guard primary != secondary else {
                throw .invalidRequest(reason: "the primary and secondary audio sources are the same address, \(primary)")
            }
        }
        if primary == nil { configuration.primaryAudioSourceDeviceIdentifier = nil }
        if secondary == nil { configuration.secondaryAudioSourceDeviceIdentifier = nil }
        accessory!.configuration = configuration
    }

    // MARK: - Preconditions

    /// The accessory as `hub` may see it: an error when it was never paired, belongs to another hub, or was unpaired
    /// by another hub (which, to `hub`, is as if it was never paired).
    private func knownAccessory(for operation: String, by hub: HubID) throws(AccessoryControlError) -> Accessory {
        guard let accessory else { throw notPaired(before: operation) }
        guard accessory.hub == hub else {
            throw accessory.owner == nil ? notPaired(before: operation) : ownedByAnotherHub(hub)
        }
        return accessory
    }

    /// A hub asked to change an accessory that belongs to another. The answer does not name that hub.
    private func ownedByAnotherHub(_ hub: HubID) -> AccessoryControlError {
        .invalidRequest(
            reason: "accessory \(id) belongs to another hub: hub \(hub) may change only the accessories it paired "
                + "(accessory ids are shared by all hubs: unpair it from its hub first, or choose another id)")
    }

    private func notPaired(before operation: String) -> AccessoryControlError {
        .invalidRequest(reason: "accessory \(id) is not paired; pair it through AccessorySetupKit before \(operation)")
    }

    /// Succeeds when the accessory is registered through `hub`.
    private func checkRegistered(for operation: String, hub: HubID) throws(AccessoryControlError) {
        let registration = try knownAccessory(for: operation, by: hub).registration
        switch registration {
        case .registered:
            break
        case .paired:
            throw .invalidRequest(reason: "accessory \(id) is not registered; register it before \(operation)")
        case .invalidated:
            throw .invalidated(
                reason: "the registration of accessory \(id) was invalidated when it was paired again; "
                    + "register it again")
        case .unpaired:
            throw .invalidated(
                reason: "accessory \(id) was unpaired, which ended its registration; pair and register it again")
        }
    }

    private func checkLength(of value: String, field: String) throws(AccessoryControlError) {
        guard value.utf8.count <= policy.maximumNameLength else {
            throw .invalidRequest(
                reason: "the \(field) is \(value.utf8.count) bytes long; the limit is \(policy.maximumNameLength)")
        }
    }

    /// A spatial rendering extension needs ``Capabilities/audioSpatialization`` (as a placement needs
    /// ``Capabilities/placement``).
    private static func checkSpatialExtension(
        _ description: AudioComponentDescription?, registered: Capabilities, id: AccessoryID
    ) throws(AccessoryControlError) {
        guard let description, !registered.contains(.audioSpatialization) else { return }
        throw .accessoryNotCapable(
            reason: "the spatialExtensionDescription (\(description)) needs the .audioSpatialization capability, "
                + "which accessory \(id) did not register")
    }

    /// The address in an identifier: `nil` when absent or empty, an error when not 6 bytes.
    private static func checkedSource(_ identifier: Data?, name: String) throws(AccessoryControlError)
        -> BluetoothAddress?
    {
        guard let identifier, !identifier.isEmpty else { return nil }
        guard let address = BluetoothAddress(bytes: identifier) else {
            throw .invalidRequest(
                reason: "the \(name)AudioSourceDeviceIdentifier must be empty or a 6-byte Bluetooth address, "
                    + "not \(identifier.count) bytes")
        }
        return address
    }

    // MARK: - Diagnostics

    private func hasUnreportedCapability(_ accessory: Accessory) -> Bool {
        let configuration = accessory.configuration
        return (configuration.deviceCapabilities.contains(.placement) && configuration.devicePlacement == nil)
            || (configuration.deviceCapabilities.contains(.audioSwitching)
                && configuration.primaryAudioSourceDeviceIdentifier == nil)
    }

    /// Recomputes the diagnostics that hold at `now`; returns whether they changed.
    @discardableResult
    private mutating func refreshDiagnostics(at now: Timestamp) -> Bool {
        // The common case first, without copying the accessory: nothing to raise and nothing raised.
        guard let isStale = accessory?.isStale else { return false }
        let grace = gracePeriod
        let due =
            accessory?.registration == .registered
            && accessory?.registeredAt.map { now >= $0.advanced(byMilliseconds: grace) } == true
        if !isStale && !due && accessory?.diagnostics.isEmpty == true { return false }
        guard let accessory else { return false }
        var diagnostics: [Diagnostic] = []
        if accessory.isStale {
            diagnostics.append(.hubOffline(accessory.hub))
        }
        if due {
            let configuration = accessory.configuration
            if configuration.deviceCapabilities.contains(.placement), configuration.devicePlacement == nil {
                diagnostics.append(.placementNotReported(after: policy.diagnosticsGracePeriod))
            }
            if configuration.deviceCapabilities.contains(.audioSwitching),
                configuration.primaryAudioSourceDeviceIdentifier == nil
            {
                diagnostics.append(.sourcesNotReported(after: policy.diagnosticsGracePeriod))
            }
        }
        guard diagnostics != accessory.diagnostics else { return false }
        self.accessory!.diagnostics = diagnostics
        return true
    }
}
