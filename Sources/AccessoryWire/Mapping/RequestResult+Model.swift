import AccessoryModel

extension Audioaccessory_V1_RequestResult {
    /// The answer to one telemetry message: NONE or the error with its reason, and the accessory's state after it
    /// (absent while the accessory is unknown).
    public init(
        requestID: String, sequence: UInt64, error: AccessoryControlError?, state: Audioaccessory_V1_AccessoryState?
    ) {
        self.init()
        self.requestID = requestID
        self.sequence = sequence
        self.error = .init(error?.code)
        self.message = error?.reason ?? ""
        if let state {
            self.state = state
        }
    }

    /// The answer to one telemetry message, from what became of it: applied (NONE), failed (the error), or a repeat of
    /// a sequence already processed (`duplicate`, with the original outcome when it is still known).
    public init(
        requestID: String, sequence: UInt64, result: RequestOutcome.Result, state: Audioaccessory_V1_AccessoryState?
    ) {
        switch result {
        case .applied:
            self.init(requestID: requestID, sequence: sequence, error: nil, state: state)
        case .failed(let error):
            self.init(requestID: requestID, sequence: sequence, error: error, state: state)
        case .duplicate(let original):
            switch original {
            case .succeeded:
                self.init(requestID: requestID, sequence: sequence, error: nil, state: state)
            case .failed(let error):
                self.init(requestID: requestID, sequence: sequence, error: error, state: state)
            case .notKept(let last):
                self.init(requestID: requestID, sequence: sequence, error: nil, state: state)
                self.error = .unspecified
                message =
                    "sequence \(sequence) was processed before (the last one processed is \(last)); its outcome is "
                    + "no longer kept, and nothing changed now"
            }
            duplicate = true
        }
    }

    /// The AudioAccessoryKit error this result reports, or `nil` on success.
    public var controlError: AccessoryControlError? {
        error.code.map { AccessoryControlError($0, reason: message) }
    }
}

extension Audioaccessory_V1_RebirthRequest {
    /// Asks a hub to send everything about `accessory` again: its count jumped from `lastSequence` to
    /// `receivedSequence`.
    public init(accessory: AccessoryID, lastSequence: UInt64, receivedSequence: UInt64) {
        self.init()
        accessoryID = accessory.rawValue
        self.lastSequence = lastSequence
        self.receivedSequence = receivedSequence
        let count = receivedSequence - lastSequence - 1
        reason =
            "sequence \(receivedSequence) follows \(lastSequence): \(count) message\(count == 1 ? "" : "s") missing; "
            + "send Paired, Register and a full update again"
    }
}
