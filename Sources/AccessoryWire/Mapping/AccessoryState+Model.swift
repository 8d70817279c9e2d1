import AccessoryModel
import Foundation

extension Audioaccessory_V1_AccessoryState {
    /// The published state of `accessory`, with the source the routing engine routes to it.
    init(
        _ accessory: Accessory, routedSource: BluetoothAddress?, epoch: UInt64 = 0,
        headTracking: HeadTrackingSession? = nil
    ) {
        self.init()
        accessoryID = accessory.id.rawValue
        hubID = accessory.hub.rawValue
        registration = .init(accessory.registration)
        name = accessory.name
        model = accessory.model
        hardwareCapabilities = .init(accessory.hardwareCapabilities)
        configuration = .init(accessory.configuration)
        self.routedSource = routedSource?.data ?? Data()
        lastSequence = accessory.lastSequence
        updatedAtUnixMs = accessory.updatedAt.unixMilliseconds
        stale = accessory.isStale
        diagnostics = accessory.diagnostics.map(\.description)
        if accessory.lastSequence != 0 {
            lastError = .init(accessory.lastError?.code)
            lastErrorMessage = accessory.lastError?.reason ?? ""
        }
        automaticSwitchingOff = !accessory.automaticSwitching
        pinnedSource = accessory.pinnedSource?.data ?? Data()
        self.epoch = epoch
        if let headTracking {
            self.headTracking = .init(
                HeadTrackingEvent(.activated, headTracking, reason: .routed, at: accessory.updatedAt),
                hub: accessory.hub)
        }
    }

    /// The published form of `state`.
    init(_ state: AccessoryState) {
        self.init(
            state.accessory, routedSource: state.routedSource, epoch: state.epoch, headTracking: state.headTracking)
    }
}

extension Audioaccessory_V1_AccessoryState {
    /// The state this message publishes.
    ///
    /// The wire does not carry when the accessory registered: it is taken as the state's last update (or `now`, if
    /// that is in the future), which is when its diagnostics are judged from. Diagnostics are read back from their
    /// words (``Diagnostic/init(description:)``).
    func state(at now: Timestamp) throws(AccessoryControlError) -> AccessoryState {
        guard let id = AccessoryID(accessoryID) else {
            throw .invalidRequest(reason: "accessory_id '\(accessoryID)' must be \(IdentifierGrammar.description)")
        }
        guard let hub = HubID(hubID) else {
            throw .invalidRequest(reason: "hub_id '\(hubID)' must be \(IdentifierGrammar.description)")
        }
        let registration = try registration.registration(field: "registration")
        let updatedAt = Timestamp(unixMilliseconds: updatedAtUnixMs)
        let accessory = Accessory(
            id: id, hub: hub, registration: registration, name: name, model: model,
            hardwareCapabilities: try hardwareCapabilities.capabilities(field: "hardware_capabilities"),
            configuration: try configuration.configuration(), lastSequence: lastSequence,
            lastError: lastError == .none || lastError == .unspecified
                ? nil : AccessoryControlError(lastError.code ?? .unknown, reason: lastErrorMessage),
            updatedAt: updatedAt,
            registeredAt: registration == .registered ? min(updatedAt, now) : nil, isStale: stale,
            diagnostics: diagnostics.map(Diagnostic.init(description:)), automaticSwitching: !automaticSwitchingOff,
            pinnedSource: BluetoothAddress(bytes: pinnedSource))
        return AccessoryState(
            accessory, routedSource: BluetoothAddress(bytes: routedSource), epoch: epoch,
            headTracking: hasHeadTracking ? try headTracking.news().session : nil)
    }
}
