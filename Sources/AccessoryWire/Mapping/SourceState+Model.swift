import AccessoryModel

extension Audioaccessory_V1_SourceState {
    /// The wire form of a playing device's report.
    init(_ report: SourceReport) {
        self.init()
        sequence = report.sequence
        activity = .init(report.activity)
        routedAccessoryID = report.routedAccessory?.rawValue ?? ""
        lastCommandSequence = report.lastCommandSequence
        lastCommandEpoch = report.lastCommandEpoch
        headTracking = report.headTracking ? .on : .off
    }

    /// The report for the routing engine; an unknown activity or a malformed accessory id is an error.
    func report() throws(AccessoryControlError) -> SourceReport {
        var routed: AccessoryID?
        if !routedAccessoryID.isEmpty {
            guard let id = AccessoryID(routedAccessoryID) else {
                throw .invalidRequest(
                    reason: "routed_accessory_id '\(routedAccessoryID)' must be \(IdentifierGrammar.description)")
            }
            routed = id
        }
        let on: Bool
        switch headTracking {
        case .on: on = true
        case .off, .unspecified: on = false
        case .UNRECOGNIZED(let raw):
            throw .invalidRequest(reason: "head_tracking is \(raw), which is not a known HeadTracking")
        }
        return SourceReport(
            sequence: sequence, activity: try activity.activity(field: "activity"), routedAccessory: routed,
            lastCommandSequence: lastCommandSequence, lastCommandEpoch: lastCommandEpoch, headTracking: on)
    }
}
