import AccessoryModel

/// Every message of the contract, read and written as model values: the generated types stay behind this.
///
/// A payload that does not decode is a ``WireError`` of its format; one that decodes but holds a value this version
/// refuses (an unknown enum value, a malformed id) is a ``WireError/Kind/invalidValue`` that names it.
extension WireCodec {
    // MARK: Telemetry (hub -> bridge)

    /// An `AccessoryTelemetry` carrying `request`.
    public func encodeTelemetry(
        _ request: AccessoryRequest, sequence: UInt64 = 0, requestID: String = "", as format: PayloadFormat
    ) -> [UInt8] {
        encode(Audioaccessory_V1_AccessoryTelemetry(request, sequence: sequence, requestID: requestID), as: format)
    }

    // MARK: Results and states (bridge -> hubs and everyone)

    public func encode(_ result: RequestResult, as format: PayloadFormat) -> [UInt8] {
        switch format {
        case .protobuf: OutboundEncoder.encode(result, state: result.state.map(OutboundEncoder.encode))
        case .json: encode(Audioaccessory_V1_RequestResult(result), as: format)
        }
    }

    /// A result; its state as of `now` (see ``decode(_:from:format:at:)-5rc7x``).
    public func decode(
        _: RequestResult.Type, from payload: [UInt8], format: PayloadFormat, at now: Timestamp
    ) throws(WireError) -> RequestResult {
        let message = try decode(Audioaccessory_V1_RequestResult.self, from: payload, format: format)
        return try valued { () throws(AccessoryControlError) in try message.result(at: now) }
    }

    /// `result`, with its state taken from `encoded` when that is the same state in the same format: in protobuf an
    /// embedded message is its field's tag, its length and its bytes, so the state's bytes go in as they are instead
    /// of being encoded again. The bytes are those `encode(result, as: format)` gives.
    public func encode(_ result: RequestResult, as format: PayloadFormat, embedding encoded: EncodedState?)
        -> [UInt8]
    {
        guard format == .protobuf, let encoded, encoded.format == .protobuf, let state = result.state,
            state == encoded.state
        else { return encode(result, as: format) }
        return OutboundEncoder.encode(result, state: encoded.bytes)
    }

    public func encode(_ state: AccessoryState, as format: PayloadFormat) -> [UInt8] {
        switch format {
        case .protobuf: OutboundEncoder.encode(state)
        case .json: encode(Audioaccessory_V1_AccessoryState(state), as: format)
        }
    }

    /// `state` encoded once, to publish and to embed in a result (``encode(_:as:embedding:)``).
    public func encoded(_ state: AccessoryState, as format: PayloadFormat) -> EncodedState {
        EncodedState(state: state, format: format, bytes: encode(state, as: format))
    }

    /// A published state, read back at `now`: the wire does not say when the accessory registered, which is taken
    /// as its last update (or `now`, if that is later).
    public func decode(
        _: AccessoryState.Type, from payload: [UInt8], format: PayloadFormat, at now: Timestamp
    ) throws(WireError) -> AccessoryState {
        let message = try decode(Audioaccessory_V1_AccessoryState.self, from: payload, format: format)
        return try valued { () throws(AccessoryControlError) in try message.state(at: now) }
    }

    // MARK: Playing devices

    public func encode(_ report: SourceReport, as format: PayloadFormat) -> [UInt8] {
        encode(Audioaccessory_V1_SourceState(report), as: format)
    }

    public func decode(_: SourceReport.Type, from payload: [UInt8], format: PayloadFormat) throws(WireError)
        -> SourceReport
    {
        let message = try decode(Audioaccessory_V1_SourceState.self, from: payload, format: format)
        return try valued { () throws(AccessoryControlError) in try message.report() }
    }

    public func encode(_ command: SwitchCommand, as format: PayloadFormat) -> [UInt8] {
        switch format {
        case .protobuf: OutboundEncoder.encode(command)
        case .json: encode(Audioaccessory_V1_SwitchCommand(command), as: format)
        }
    }

    /// A command, for the source its topic names.
    public func decode(
        _: SwitchCommand.Type, from payload: [UInt8], format: PayloadFormat, source: BluetoothAddress
    ) throws(WireError) -> SwitchCommand {
        let message = try decode(Audioaccessory_V1_SwitchCommand.self, from: payload, format: format)
        return try valued { () throws(AccessoryControlError) in try message.command(for: source) }
    }

    // MARK: Controls (home automation -> bridge)

    public func encode(_ request: ControlsRequest, as format: PayloadFormat) -> [UInt8] {
        encode(Audioaccessory_V1_AccessoryControls(request), as: format)
    }

    public func decode(_: ControlsRequest.Type, from payload: [UInt8], format: PayloadFormat) throws(WireError)
        -> ControlsRequest
    {
        let message = try decode(Audioaccessory_V1_AccessoryControls.self, from: payload, format: format)
        return try valued { () throws(AccessoryControlError) in try message.request() }
    }

    // MARK: Statuses and rebirth

    public func encode(_ status: HubStatus, as format: PayloadFormat) -> [UInt8] {
        encode(Audioaccessory_V1_HubStatus(status), as: format)
    }

    /// A hub's status; an empty payload is offline (every field at its default).
    public func decode(_: HubStatus.Type, from payload: [UInt8], format: PayloadFormat) throws(WireError) -> HubStatus {
        try decode(Audioaccessory_V1_HubStatus.self, from: payload, format: format).status
    }

    public func encode(_ status: BridgeStatus, as format: PayloadFormat) -> [UInt8] {
        encode(Audioaccessory_V1_BridgeStatus(status), as: format)
    }

    public func decode(_: BridgeStatus.Type, from payload: [UInt8], format: PayloadFormat) throws(WireError)
        -> BridgeStatus
    {
        try decode(Audioaccessory_V1_BridgeStatus.self, from: payload, format: format).status
    }

    public func encode(_ layout: BridgeLayout, as format: PayloadFormat) -> [UInt8] {
        encode(Audioaccessory_V1_BridgeLayout(layout), as: format)
    }

    public func decode(_: BridgeLayout.Type, from payload: [UInt8], format: PayloadFormat) throws(WireError)
        -> BridgeLayout
    {
        let message = try decode(Audioaccessory_V1_BridgeLayout.self, from: payload, format: format)
        return try valued { () throws(AccessoryControlError) in try message.layout() }
    }

    public func encode(_ request: RebirthRequest, as format: PayloadFormat) -> [UInt8] {
        encode(Audioaccessory_V1_RebirthRequest(request), as: format)
    }

    public func decode(_: RebirthRequest.Type, from payload: [UInt8], format: PayloadFormat) throws(WireError)
        -> RebirthRequest
    {
        let message = try decode(Audioaccessory_V1_RebirthRequest.self, from: payload, format: format)
        return try valued { () throws(AccessoryControlError) in try message.request() }
    }

    // MARK: Head tracking (bridge -> hub and host)

    /// A session's news, for the accessory's hub `hub` (and the session's host).
    public func encode(_ event: HeadTrackingEvent, hub: HubID, as format: PayloadFormat) -> [UInt8] {
        encode(Audioaccessory_V1_HeadTrackingSession(event, hub: hub), as: format)
    }

    /// A session's news, with the hub it names (if any).
    public func decode(_: HeadTrackingEvent.Type, from payload: [UInt8], format: PayloadFormat) throws(WireError)
        -> (event: HeadTrackingEvent, hub: HubID?)
    {
        let message = try decode(Audioaccessory_V1_HeadTrackingSession.self, from: payload, format: format)
        return (try valued { () throws(AccessoryControlError) in try message.news() }, message.hub)
    }

    /// Runs a decoding that may also refuse a value, with that refusal as a ``WireError``.
    private func valued<T>(_ body: () throws(AccessoryControlError) -> T) throws(WireError) -> T {
        do {
            return try body()
        } catch {
            throw WireError(.invalidValue, error.reason)
        }
    }
}
