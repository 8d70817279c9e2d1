import AccessoryModel

extension Audioaccessory_V1_RequestResult {
    init(_ result: RequestResult) {
        self.init()
        requestID = result.requestID
        sequence = result.sequence
        switch result.outcome {
        case .succeeded:
            error = .none
        case .failed(let failure):
            error = .init(failure.code)
            message = failure.reason
        case .notKept(let reason):
            error = .unspecified
            message = reason
        }
        duplicate = result.duplicate
        if let state = result.state {
            self.state = .init(state)
        }
        epoch = result.epoch
    }

    func result(at now: Timestamp) throws(AccessoryControlError) -> RequestResult {
        let outcome: RequestResult.Outcome =
            switch (error, duplicate) {
            case (.none, _): .succeeded
            case (.unspecified, true): .notKept(message)
            default: .failed(AccessoryControlError(error.code ?? .unknown, reason: message))
            }
        return RequestResult(
            requestID: requestID, sequence: sequence, outcome: outcome, duplicate: duplicate,
            state: hasState ? try state.state(at: now) : nil, epoch: epoch)
    }
}

extension Audioaccessory_V1_HubStatus {
    init(_ status: HubStatus) {
        self.init()
        online = status.online
        sinceUnixMs = status.since.unixMilliseconds
    }

    var status: HubStatus { HubStatus(online: online, since: Timestamp(unixMilliseconds: sinceUnixMs)) }
}

extension Audioaccessory_V1_BridgeStatus {
    init(_ status: BridgeStatus) {
        self.init()
        online = status.online
        version = status.version
        sinceUnixMs = status.since.unixMilliseconds
    }

    var status: BridgeStatus {
        BridgeStatus(online: online, version: version, since: Timestamp(unixMilliseconds: sinceUnixMs))
    }
}

extension Audioaccessory_V1_BridgeLayout {
    init(_ layout: BridgeLayout) {
        self.init()
        slots = UInt32(layout.slots?.count ?? 0)
        version = layout.version
    }

    func layout() throws(AccessoryControlError) -> BridgeLayout {
        guard slots != 0 else { return BridgeLayout(slots: nil, version: version) }
        guard let count = ClusterSlots(Int(slots)) else {
            throw .invalidRequest(
                reason: "a layout's slots must be 0 (a single bridge) or \(ClusterSlots.range.lowerBound)-"
                    + "\(ClusterSlots.range.upperBound), not \(slots)")
        }
        return BridgeLayout(slots: count, version: version)
    }
}

extension Audioaccessory_V1_RebirthRequest {
    init(_ request: RebirthRequest) {
        self.init()
        accessoryID = request.accessory.rawValue
        lastSequence = request.lastSequence
        receivedSequence = request.receivedSequence
        reason = request.reason
    }

    func request() throws(AccessoryControlError) -> RebirthRequest {
        guard let accessory = AccessoryID(accessoryID) else {
            throw .invalidRequest(reason: "accessory_id '\(accessoryID)' must be \(IdentifierGrammar.description)")
        }
        return RebirthRequest(
            accessory: accessory, lastSequence: lastSequence, receivedSequence: receivedSequence, reason: reason)
    }
}
