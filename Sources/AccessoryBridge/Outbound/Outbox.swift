import AccessoryModel
import AccessoryWire
import BridgeCore
import Logging
import MQTTClient

/// Builds and publishes everything the bridge sends: accessory states, request results, switch commands, rebirth
/// requests, its own status and home automation's JSON, each with its topic, QoS, retain flag and MQTT 5 content type.
/// Each publish says whether the message could be queued. It decides nothing: what goes where was decided before.
struct Outbox: Sendable {
    let publisher: any MessagePublisher
    let roots: TopicRoots
    /// The epoch of the slot served (0: one bridge), carried by every result.
    let epoch: UInt64
    let codec: WireCodec
    let metrics: BridgeMetrics
    let logger: Logger
    /// Shared by every copy: what the log says while the client's queue is full.
    let overflow = QueueOverflow()

    /// Publishes an accessory's retained state.
    func publishState(_ state: EncodedState) -> Bool {
        send(Topic.accessoryState(accessory: state.state.accessory.id), state.bytes, format: state.format, retain: true)
    }

    /// Publishes the answer to one telemetry message on the hub's result topic, and on `responseTopic` when allowed
    /// (the decision is ``ResponseTopic``'s), with the request's correlation data. Says whether the result topic's copy
    /// could be queued. `published` is the state just published, whose bytes the result embeds.
    func publishResult(
        _ answer: BridgeAction.Answer, hub: HubID, accessory: AccessoryID, requestID: String, sequence: UInt64,
        format: PayloadFormat, responseTopic: ResponseTopic, correlationData: [UInt8]?, published: EncodedState?
    ) -> Bool {
        metrics.result(answer.result)
        let result = RequestResult(
            requestID: requestID, sequence: sequence, result: answer.result, state: answer.state, epoch: epoch)
        let bytes = codec.encode(result, as: format, embedding: published)
        let sent = send(Topic.result(hub: hub, accessory: accessory), bytes, format: format, retain: false)
        if case .allowed(let topic) = responseTopic {
            send(topicName: topic, bytes, format: format, retain: false, correlationData: correlationData)
        }
        return sent
    }

    /// Publishes the answer to a controls request on the accessory's controls result topic.
    func publishControlsResult(
        _ answer: BridgeAction.Answer, accessory: AccessoryID, requestID: String, format: PayloadFormat,
        published: EncodedState?
    ) -> Bool {
        metrics.result(answer.result)
        let result = RequestResult(
            requestID: requestID, sequence: 0, result: answer.result, state: answer.state, epoch: epoch)
        return send(Topic.controlsResult(accessory: accessory), codec.encode(result, as: format, embedding: published),
            format: format, retain: false)
    }

    /// Asks a hub to send everything about an accessory again, in the format the hub reads.
    func publishRebirthRequest(_ rebirth: BridgeAction.Rebirth, format: PayloadFormat) -> Bool {
        let request = RebirthRequest(
            accessory: rebirth.accessory, lastSequence: rebirth.lastSequence, receivedSequence: rebirth.receivedSequence)
        return send(Topic.rebirth(hub: rebirth.hub), codec.encode(request, as: format), format: format, retain: false)
    }

    /// Sends a playing device a switch command, in the format the device reads.
    func publishCommand(_ command: SwitchCommand, format: PayloadFormat) -> Bool {
        metrics.commands[command.action]?.increment()
        let bytes = codec.encode(command, as: format)
        return send(Topic.sourceCommands(source: command.source), bytes, format: format, retain: false)
    }

    /// Tells the session's host and the accessory's hub what became of its head-tracking session (rule 13): the same
    /// message on both topics (each in the format its reader reads), QoS 1, not retained, the host's first, so that
    /// a host hears of a session before the hub can send it a frame. Says whether both could be queued.
    func publishHeadTracking(
        _ event: HeadTrackingEvent, hub: HubID, hostFormat: PayloadFormat, hubFormat: PayloadFormat
    ) -> Bool {
        metrics.headTracking[event.kind]?.increment()
        let bytes = codec.encode(event, hub: hub, as: hostFormat)
        let toHost = send(Topic.hostHeadTracking(host: event.session.host), bytes, format: hostFormat, retain: false)
        let hubBytes = hubFormat == hostFormat ? bytes : codec.encode(event, hub: hub, as: hubFormat)
        let toHub = send(Topic.headTracking(hub: hub, accessory: event.session.accessory), hubBytes, format: hubFormat,
            retain: false)
        return toHost && toHub
    }

    /// Publishes plain JSON (or text, or an empty payload) for home automation, QoS 1.
    @discardableResult
    func publish(json payload: [UInt8], to topic: String, retain: Bool) -> Bool {
        publish(
            MQTTMessage(
                topic: topic, payload: payload, qos: .atLeastOnce, retain: retain,
                properties: payload.isEmpty ? .none : MQTTProperties(contentType: "application/json")))
    }

    @discardableResult
    func publish(_ message: MQTTMessage) -> Bool {
        do {
            try publisher.send(message)
            return true
        } catch {
            metrics.publishFailures.increment()
            if error.kind == .queueFull {
                overflow.refused(message, error, logger: logger)
            } else {
                logger.error("publish failed", metadata: ["mqtt.topic": "\(message.topic)", "error": "\(error)"])
            }
            return false
        }
    }

    private func send(_ topic: Topic, _ bytes: [UInt8], format: PayloadFormat, retain: Bool) -> Bool {
        send(topicName: roots.name(topic), bytes, format: format, retain: retain, correlationData: nil)
    }

    @discardableResult
    private func send(
        topicName: String, _ bytes: [UInt8], format: PayloadFormat, retain: Bool, correlationData: [UInt8]?
    ) -> Bool {
        publish(
            MQTTMessage(
                topic: topicName, payload: bytes, qos: .atLeastOnce, retain: retain,
                properties: MQTTProperties(contentType: format.contentType, correlationData: correlationData)))
    }
}
