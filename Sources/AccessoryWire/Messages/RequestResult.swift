import AccessoryModel

/// The bridge's answer to one telemetry message (`RequestResult`).
public struct RequestResult: Hashable, Sendable {
    /// What became of the request.
    public enum Outcome: Hashable, Sendable {
        case succeeded
        /// AudioAccessoryKit's error, with the bridge's reason.
        case failed(AccessoryControlError)
        /// A repeat of a sequence older than the last one processed: its outcome is no longer kept (the reason says so).
        case notKept(String)
    }

    /// The request id and sequence of the telemetry this answers.
    public var requestID: String
    public var sequence: UInt64
    public var outcome: Outcome
    /// The sequence was processed before; ``outcome`` is the original one (or ``Outcome/notKept(_:)``).
    public var duplicate: Bool
    /// `AccessoryControlDevice.current(for:)` after the request; `nil` when the requesting hub may not see it.
    public var state: AccessoryState?
    /// The ownership epoch of the bridge that answered: 0 for a single bridge. A hub ignores a result whose epoch is
    /// below the last it saw for the accessory (an older owner, cut off since, answered it).
    public var epoch: UInt64

    public init(
        requestID: String, sequence: UInt64, outcome: Outcome, duplicate: Bool = false, state: AccessoryState?,
        epoch: UInt64 = 0
    ) {
        self.requestID = requestID
        self.sequence = sequence
        self.outcome = outcome
        self.duplicate = duplicate
        self.state = state
        self.epoch = epoch
    }

    /// The answer to telemetry `sequence` / `requestID`, from what became of it.
    public init(
        requestID: String, sequence: UInt64, result: RequestOutcome.Result, state: AccessoryState?, epoch: UInt64 = 0
    ) {
        let outcome: Outcome
        var duplicate = false
        switch result {
        case .applied: outcome = .succeeded
        case .failed(let error): outcome = .failed(error)
        case .duplicate(let original):
            duplicate = true
            switch original {
            case .succeeded: outcome = .succeeded
            case .failed(let error): outcome = .failed(error)
            case .notKept(let last):
                outcome = .notKept(
                    "sequence \(sequence) was processed before (the last one processed is \(last)); its outcome is no "
                        + "longer kept, and nothing changed now")
            }
        }
        self.init(
            requestID: requestID, sequence: sequence, outcome: outcome, duplicate: duplicate, state: state, epoch: epoch)
    }

    /// The AudioAccessoryKit error this result reports, if any.
    public var error: AccessoryControlError? {
        if case .failed(let error) = outcome { error } else { nil }
    }
}
