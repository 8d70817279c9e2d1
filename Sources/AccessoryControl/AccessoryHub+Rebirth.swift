import AccessoryModel
import AccessoryWire
import Logging
import MQTTClient

/// The bridge's rebirth requests (`R/hubs/{hub}/rebirth`; docs/wire-contract.md, "For hub authors"): after a gap in
/// an accessory's telemetry the bridge asks its hub to say again what the accessory is. The hub answers from what the
/// bridge took of it (``AccessoryRebirth``), once none of the accessory's requests is on the wire: with its whole
/// configuration as an update when the bridge had taken its pairing and registration before the gap, else (or when
/// that update is refused) paired, registered and configured, as the C SDK does.
extension AccessoryHub {
    /// What the hub did with the bridge's rebirth requests.
    public struct RebirthStatus: Hashable, Sendable {
        /// Requests received about this hub's accessories.
        public var requests = 0
        /// Answered with the accessory's configuration alone (the bridge had its pairing and registration).
        public var updates = 0
        /// Answered with the whole: paired, then registered and configured when it was registered.
        public var whole = 0
        /// Left alone: an answer for the same accessory was under way.
        public var coalesced = 0
        /// About an accessory this hub knows nothing of (neither told to the bridge by this run nor learned from a
        /// result): logged, not answered.
        public var unknown = 0
        /// Unreadable: logged.
        public var malformed = 0
    }

    struct RebirthAnswers {
        var status = RebirthStatus()
        var answering: Set<AccessoryID> = []
    }

    /// What the hub did with the bridge's rebirth requests.
    public var rebirthStatus: RebirthStatus {
        rebirthAnswers.withLock { $0.status }
    }

    /// A rebirth request, on the network thread: answered in a task of its own (it never waits).
    func receiveRebirthRequest(_ message: MQTTMessage) {
        let request: RebirthRequest
        do {
            let format = try PayloadFormat.detect(contentType: message.properties.contentType, payload: message.payload)
            request = try codec.decode(RebirthRequest.self, from: message.payload, format: format)
        } catch {
            rebirthAnswers.withLock { $0.status.malformed += 1 }
            logger.warning(
                "unreadable rebirth request from the bridge",
                metadata: ["mqtt.topic": "\(message.topic)", "error": "\(error)"])
            return
        }
        let answering = rebirthAnswers.withLock { answers in
            answers.status.requests += 1
            guard answers.answering.insert(request.accessory).inserted else {
                answers.status.coalesced += 1
                return false
            }
            return true
        }
        guard answering else { return }
        Task { [weak self] in
            guard let self else { return }
            await self.answer(request)
            self.rebirthAnswers.withLock { _ = $0.answering.remove(request.accessory) }
        }
    }

    private func answer(_ request: RebirthRequest) async {
        let id = request.accessory
        await inFlight.untilNone(of: id)
        let known = rebirths.withLock { $0[id] } ?? lastKnownState(of: id).flatMap(AccessoryRebirth.init(learning:))
        let metadata: Logger.Metadata = [
            "accessory.id": "\(id)", "last_sequence": "\(request.lastSequence)",
            "received_sequence": "\(request.receivedSequence)",
        ]
        guard let known else {
            rebirthAnswers.withLock { $0.status.unknown += 1 }
            logger.warning(
                "the bridge asked for a rebirth of an accessory this hub knows nothing of", metadata: metadata)
            return
        }
        let (probe, requests) = known.answer(lastSequence: request.lastSequence)
        let said = await sayAgain(id, probe: probe, requests: requests, metadata: metadata) {
            request throws(AccessoryControlError) in try await send(request, for: id)
        }
        if case .configuration = said {
            rebirthAnswers.withLock { $0.status.updates += 1 }
            logger.info("answered the bridge's rebirth request with the accessory's configuration", metadata: metadata)
        } else {
            rebirthAnswers.withLock { $0.status.whole += 1 }
            logger.info("answered the bridge's rebirth request with the whole rebirth", metadata: metadata)
        }
    }

    /// What ``sayAgain(_:probe:requests:metadata:send:)`` said.
    enum Said {
        /// The configuration alone: the bridge took the probe.
        case configuration
        /// The whole rebirth, each request's refusal or failure logged.
        case whole
        /// The hub moved meanwhile: nothing more was sent (the move says it again under the new root).
        case moved
    }

    /// Says an accessory again, for a move or a rebirth request: `probe` first when there is one; not taken, the
    /// `requests` one by one. `send` gives the bridge's result (or throws it as an error), `nil` when the hub moved.
    func sayAgain(
        _ id: AccessoryID, probe: AccessoryRequest?, requests: [AccessoryRequest], metadata: Logger.Metadata,
        send: (AccessoryRequest) async throws(AccessoryControlError) -> RequestResult?
    ) async -> Said {
        if let probe, case .succeeded? = (try? await send(probe))??.outcome { return .configuration }
        for request in requests {
            var problem: AccessoryControlError?
            do {
                guard let result = try await send(request) else { return .moved }
                if case .failed(let error) = result.outcome { problem = error }
            } catch {
                problem = error
            }
            if let problem {
                logger.warning(
                    "the bridge did not take a request of an accessory's rebirth",
                    metadata: metadata.merging(["request": "\(request.name)", "error": "\(problem)"]) { $1 })
            }
        }
        return .whole
    }
}
