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

    /// The AudioAccessoryKit error this result reports, or `nil` on success.
    public var controlError: AccessoryControlError? {
        error.code.map { AccessoryControlError($0, reason: message) }
    }
}
