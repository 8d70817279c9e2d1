import AccessoryModel
import AccessoryWire
import BridgeCore
import HomeAutomation
import Logging
import MQTTClient
import Metrics

/// Running what the core decided: each action published (or handed to etcd's side), in order; what could not be
/// published goes back to the core, which owes it until publishing resumes.
extension MessageProcessor {
    /// A request handed to the core: where its answer goes and in which format.
    struct Request {
        enum ReplyTo {
            /// Telemetry: the hub's result topic (and the response topic the request named, when allowed).
            case hub(HubID, responseTopic: ResponseTopic)
            /// Controls: the accessory's controls result topic.
            case controls
        }

        var message: MQTTMessage
        var replyTo: ReplyTo
        var accessory: AccessoryID
        var format: PayloadFormat
        var requestID = ""
        var sequence: UInt64 = 0
    }

    /// How many states that could not be published go again per batch: what waits is bounded by the client's queue,
    /// not by the fleet.
    static let republishBatch = 1_000

    /// What could not be published, now that publishing works again: the owed commands, then the states a batch at
    /// a time until the client's queue refuses one (its draining resumes the rest).
    func resumePublishing() {
        perform(core.publishingResumed(at: clock.now, statesAtMost: Self.republishBatch))
    }

    /// Runs what the core decided; when it asks for the next batch of states (``BridgeAction/continuePublishing``)
    /// and everything before went out, asks for it.
    func perform(_ actions: [BridgeAction]) {
        var actions = actions
        while run(actions) {
            actions = core.publishingResumed(at: clock.now, statesAtMost: Self.republishBatch)
        }
    }

    /// Publishes each action in order; what cannot be published goes back to the core. Returns whether the actions
    /// asked for the next batch of states with everything before it published.
    private func run(_ actions: [BridgeAction]) -> Bool {
        var allSent = true
        for action in actions {
            let sent: Bool
            switch action {
            case .sendCommand(let command):
                sent = outbox.publishCommand(command, format: readerFormats.format(of: command.source))
                if sent {
                    if let receivedAt { metrics.toCommand.record(duration: ContinuousClock.now - receivedAt) }
                    publish(homeAutomation?.commandSent(command))
                }
            case .publishState(let state):
                sent = publishState(codec.encoded(state, as: readerFormats.format(of: state.accessory.hub)))
            case .answer(let answer):
                guard let request = requests.popFirst() else {
                    assertionFailure("an answer with no request waiting for it")
                    continue
                }
                sent = self.answer(request, with: answer, allSent: &allSent)
            case .requestRebirth(let rebirth):
                metrics.rebirthRequests.increment()
                logger.warning(
                    "gap in a hub's sequence",
                    metadata: [
                        "accessory.id": "\(rebirth.accessory)", "hub.id": "\(rebirth.hub)",
                        "last_sequence": "\(rebirth.lastSequence)", "sequence": "\(rebirth.receivedSequence)",
                    ])
                sent = outbox.publishRebirthRequest(rebirth, format: readerFormats.format(of: rebirth.hub))
            case .watchSource(let source):
                sent = watch(source, true)
                sharedDevices?.send(.listed(source))
            case .unwatchSource(let source):
                sent = watch(source, false)
                sharedDevices?.send(.unlisted(source))
            case .noteWorn(let listing):
                sharedDevices?.send(.worn(listing))
                sent = true
            case .claimDevice(let claim):
                logger.debug(
                    "claiming a shared device", metadata: ["source.id": "\(claim.source)", "accessory.id": "\(claim.accessory)"])
                sharedDevices?.send(.claim(claim))
                sent = true
            case .releaseDevice(let release):
                sharedDevices?.send(.release(release))
                sent = true
            case .headTracking(let event, let hub):
                sent = outbox.publishHeadTracking(
                    event, hub: hub, hostFormat: readerFormats.format(of: event.session.host),
                    hubFormat: readerFormats.format(of: hub))
                if sent { publish(homeAutomation?.headTracking(event)) }
            case .continuePublishing:
                return allSent
            }
            if !sent {
                core.notSent(action)
                allSent = false
            }
        }
        return false
    }

    /// Publishes the state the request changed, in the request's format, and the answer embedding those bytes; says
    /// whether the answer could be queued (a state that could not is given back to the core here).
    private func answer(_ request: Request, with answer: BridgeAction.Answer, allSent: inout Bool) -> Bool {
        note(answer, of: request)
        var published: EncodedState?
        if answer.publishesState, let state = answer.state {
            let encoded = codec.encoded(state, as: request.format)
            published = encoded
            if !publishState(encoded) {
                core.notSent(.publishState(state))
                allSent = false
            }
        }
        switch request.replyTo {
        case .hub(let hub, let responseTopic):
            return outbox.publishResult(
                answer, hub: hub, accessory: request.accessory, requestID: request.requestID,
                sequence: request.sequence, format: request.format, responseTopic: responseTopic,
                correlationData: request.message.properties.correlationData, published: published)
        case .controls:
            return outbox.publishControlsResult(
                answer, accessory: request.accessory, requestID: request.requestID, format: request.format,
                published: published)
        }
    }

    /// Publishes an accessory's retained state and what home automation is owed for it (its view, its config);
    /// returns whether all of it could be queued: if not, the state is published again later, with the rest.
    private func publishState(_ state: EncodedState) -> Bool {
        let stateSent = outbox.publishState(state)
        let automationSent = publish(homeAutomation?.stateChanged(state.state))
        return stateSent && automationSent
    }

    /// Publishes what home automation is owed; tells it what the client's queue refused. Returns whether all of it
    /// could be queued.
    @discardableResult
    func publish(_ publications: [HomeAutomationStateMachine.Publication]?) -> Bool {
        var allSent = true
        for publication in publications ?? [] {
            guard !outbox.publish(json: publication.payload, to: publication.topic, retain: publication.retain) else {
                continue
            }
            homeAutomation?.notSent(publication)
            allSent = false
        }
        return allSent
    }

    /// Logs and counts what became of a request.
    private func note(_ answer: BridgeAction.Answer, of request: Request) {
        switch answer.result {
        case .applied:
            return
        case .failed(let error):
            var metadata: Logger.Metadata = [
                "mqtt.topic": "\(request.message.topic)", "accessory.id": "\(request.accessory)",
                "error": "\(error.code.rawValue)", "reason": "\(error.reason)",
            ]
            if case .hub(let hub, _) = request.replyTo { metadata["hub.id"] = "\(hub)" }
            logger.info("request failed", metadata: metadata)
        case .duplicate:
            metrics.duplicates.increment()
            logger.info(
                "duplicate telemetry",
                metadata: [
                    "mqtt.topic": "\(request.message.topic)", "accessory.id": "\(request.accessory)",
                    "sequence": "\(request.sequence)",
                ])
        }
    }

    /// Starts or stops reading a playing device's state (a cluster's slot reads those its accessories list).
    private func watch(_ source: BluetoothAddress, _ on: Bool) -> Bool {
        let topic = roots.name(.sourceState(source: source))
        do {
            if on { try outbox.publisher.subscribe(topic) } else { try outbox.publisher.unsubscribe(topic) }
        } catch {
            logger.error(
                on ? "could not subscribe to a playing device's state" : "could not unsubscribe",
                metadata: ["mqtt.filter": "\(topic)", "error": "\(error)"])
        }
        // Not connected now: the client remembers the subscription and sends it at the next connection. Refused
        // otherwise (an invalid filter, no memory): logged above, and not tried again.
        return true
    }
}
