import AccessoryModel
import Foundation

extension Audioaccessory_V1_HeadTrackingSession {
    /// The wire form of a session's news, for the accessory's hub `hub` and the session's host.
    init(_ event: HeadTrackingEvent, hub: HubID) {
        self.init()
        let session = event.session
        accessoryID = session.accessory.rawValue
        sessionID = Data(session.id.bytes)
        self.event =
            switch event.kind {
            case .activated: .activated
            case .stateChanged: .stateChanged
            case .invalidated: .invalidated
            }
        host = session.host.data
        headTrackingActive = session.isHeadTrackingActive
        restorationID = session.restorationID
        epoch = session.order.epoch
        sequence = session.order.sequence
        reason = .init(event.reason)
        issuedAtUnixMs = event.issuedAt.unixMilliseconds
        hubID = hub.rawValue
    }

    /// The news this message carries; anything malformed is an `invalidRequest` that names the field.
    func news() throws(AccessoryControlError) -> HeadTrackingEvent {
        guard let accessory = AccessoryID(accessoryID) else {
            throw .invalidRequest(reason: "accessory_id '\(accessoryID)' must be \(IdentifierGrammar.description)")
        }
        guard let id = HeadTrackingSessionID(bytes: sessionID) else {
            throw .invalidRequest(reason: "session_id must be 16 bytes, not \(sessionID.count)")
        }
        guard let host = BluetoothAddress(bytes: host) else {
            throw .invalidRequest(reason: "host must be a 6-byte Bluetooth address, not \(host.count) bytes")
        }
        let kind: HeadTrackingEvent.Kind
        switch event {
        case .activated: kind = .activated
        case .stateChanged: kind = .stateChanged
        case .invalidated: kind = .invalidated
        case .unspecified, .UNRECOGNIZED:
            throw .invalidRequest(reason: "event is \(event.rawValue), which is not a known HeadTrackingEvent")
        }
        let session = HeadTrackingSession(
            accessory: accessory, id: id, host: host, isHeadTrackingActive: headTrackingActive,
            order: CommandOrder(epoch: epoch, sequence: sequence))
        return HeadTrackingEvent(
            kind, session, reason: try reason.reason(), at: Timestamp(unixMilliseconds: issuedAtUnixMs))
    }

    /// The hub the accessory belongs to, when the message names one.
    var hub: HubID? { HubID(hubID) }
}

extension Audioaccessory_V1_HeadTrackingReason {
    init(_ reason: HeadTrackingEvent.Reason) {
        self =
            switch reason {
            case .routed: .routed
            case .routeMoved: .routeMoved
            case .takenOff: .takenOff
            case .unrouted: .unrouted
            case .registrationEnded: .registrationEnded
            case .ineligible: .ineligible
            case .switchChanged: .switchChanged
            case .shutdown: .shutdown
            }
    }

    func reason() throws(AccessoryControlError) -> HeadTrackingEvent.Reason {
        switch self {
        case .routed: .routed
        case .routeMoved: .routeMoved
        case .takenOff: .takenOff
        case .unrouted: .unrouted
        case .registrationEnded: .registrationEnded
        case .ineligible: .ineligible
        case .switchChanged: .switchChanged
        case .shutdown: .shutdown
        case .unspecified, .UNRECOGNIZED:
            throw .invalidRequest(reason: "reason is \(rawValue), which is not a known HeadTrackingReason")
        }
    }
}
