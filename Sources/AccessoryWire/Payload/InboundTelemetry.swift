import AccessoryModel

/// Telemetry as the bridge reads it: its sequence, its request id, and the request it makes of the accessory its
/// topic names (or why it makes none, which the hub is told with this sequence and request id).
public struct InboundTelemetry: Hashable, Sendable {
    /// The hub's sequence (0: unsequenced).
    public var sequence: UInt64
    /// Echoed in the RequestResult.
    public var requestID: String
    /// The request, or the error that answers it.
    public var request: Result<AccessoryRequest, AccessoryControlError>

    public init(sequence: UInt64, requestID: String, request: Result<AccessoryRequest, AccessoryControlError>) {
        self.sequence = sequence
        self.requestID = requestID
        self.request = request
    }

    /// The telemetry swift-protobuf decoded, mapped to the model.
    init(_ telemetry: Audioaccessory_V1_AccessoryTelemetry, for accessory: AccessoryID) {
        self.init(
            sequence: telemetry.sequence, requestID: telemetry.requestID,
            request: Result { () throws(AccessoryControlError) in try telemetry.request(for: accessory) })
    }
}

extension WireCodec {
    /// Reads telemetry for `accessory` from `payload` in `format`, or explains why the payload is unreadable. A
    /// payload that reads but makes no valid request (an enum value unknown to this version, another accessory's id)
    /// becomes the error that answers it.
    public func readTelemetry(from payload: [UInt8], format: PayloadFormat, for accessory: AccessoryID)
        throws(WireError) -> InboundTelemetry
    {
        let telemetry = try decode(Audioaccessory_V1_AccessoryTelemetry.self, from: payload, format: format)
        return InboundTelemetry(telemetry, for: accessory)
    }
}
