import AccessoryModel
import AccessoryWire
import Logging
import MQTTClient

/// Builds and publishes everything the bridge sends: accessory states, request results, switch commands and its own
/// status, each with its topic, QoS, retain flag and MQTT 5 content type.
struct Outbox: Sendable {
    let publisher: any MessagePublisher
    let root: TopicRoot
    let codec: WireCodec
    /// The format of commands, statuses, and states no request's format decides.
    let defaultFormat: PayloadFormat
    let metrics: BridgeMetrics
    let logger: Logger

    /// The encoded state of `accessory`, for the retained state topic and for results.
    func encodeState(_ accessory: Accessory, routedSource: BluetoothAddress?, as format: PayloadFormat) -> [UInt8] {
        switch format {
        case .protobuf: OutboundEncoder.encodeState(accessory, routedSource: routedSource)
        case .json: codec.encode(Audioaccessory_V1_AccessoryState(accessory, routedSource: routedSource), as: .json)
        }
    }

    /// Publishes the retained state; returns its bytes.
    @discardableResult
    func publishState(_ accessory: Accessory, routedSource: BluetoothAddress?, as format: PayloadFormat) -> [UInt8] {
        let bytes = encodeState(accessory, routedSource: routedSource, as: format)
        send(Topic.accessoryState(accessory: accessory.id), bytes, format: format, retain: true)
        return bytes
    }

    /// Publishes the answer to one telemetry message on the hub's result topic, and on the request's MQTT 5 response
    /// topic when it has one. Returns the result's bytes.
    @discardableResult
    func publishResult(
        hub: HubID, accessory: AccessoryID, requestID: String, sequence: UInt64, error: AccessoryControlError?,
        state: (accessory: Accessory, routedSource: BluetoothAddress?, encoded: [UInt8]?)?, format: PayloadFormat,
        replyTo request: MQTTProperties
    ) -> [UInt8] {
        metrics.result(error?.code)
        let bytes: [UInt8]
        switch format {
        case .protobuf:
            let stateBytes = state.map {
                $0.encoded ?? OutboundEncoder.encodeState($0.accessory, routedSource: $0.routedSource)
            }
            bytes = OutboundEncoder.encodeResult(requestID: requestID, sequence: sequence, error: error, state: stateBytes)
        case .json:
            let message = Audioaccessory_V1_RequestResult(
                requestID: requestID, sequence: sequence, error: error,
                state: state.map { Audioaccessory_V1_AccessoryState($0.accessory, routedSource: $0.routedSource) })
            bytes = codec.encode(message, as: .json)
        }
        resendResult(bytes, format: format, hub: hub, accessory: accessory, replyTo: request)
        return bytes
    }

    /// Publishes a result again, as it was: the answer to a duplicate.
    func resendResult(
        _ bytes: [UInt8], format: PayloadFormat, hub: HubID, accessory: AccessoryID, replyTo request: MQTTProperties
    ) {
        send(Topic.result(hub: hub, accessory: accessory), bytes, format: format, retain: false)
        guard let responseTopic = request.responseTopic, !responseTopic.isEmpty else { return }
        // Only under the requesting hub's own responses: a hub must not be able to make the bridge write anywhere
        // else (on a device's commands, say), which the broker's ACL cannot prevent since the bridge may write there.
        let allowed = "\(root)/hubs/\(hub)/responses/"
        guard responseTopic.hasPrefix(allowed), responseTopic.utf8.count > allowed.utf8.count,
            !responseTopic.contains("+"), !responseTopic.contains("#")
        else {
            metrics.refusedResponseTopics.increment()
            logger.warning(
                "refused a response topic outside the hub's own",
                metadata: ["mqtt.response_topic": "\(responseTopic)", "hub.id": "\(hub)", "allowed": "\(allowed)…"])
            return
        }
        send(topicName: responseTopic, bytes, format: format, retain: false, correlationData: request.correlationData)
    }

    /// Asks a hub to send everything about an accessory again.
    func publishRebirthRequest(hub: HubID, _ request: Audioaccessory_V1_RebirthRequest) {
        send(Topic.rebirth(hub: hub), codec.encode(request, as: defaultFormat), format: defaultFormat, retain: false)
    }

    func publishCommand(_ command: SwitchCommand) {
        metrics.commands[command.action]?.increment()
        let bytes =
            switch defaultFormat {
            case .protobuf: OutboundEncoder.encodeCommand(command)
            case .json: codec.encode(Audioaccessory_V1_SwitchCommand(command), as: .json)
            }
        send(Topic.sourceCommands(source: command.source), bytes, format: defaultFormat, retain: false)
    }

    func bridgeStatus(online: Bool, version: String, since: Timestamp) -> MQTTMessage {
        let status = Audioaccessory_V1_BridgeStatus.with {
            $0.online = online
            $0.version = version
            $0.sinceUnixMs = since.unixMilliseconds
        }
        return MQTTMessage(
            topic: Topic.bridgeStatus.name(under: root), payload: codec.encode(status, as: defaultFormat),
            qos: .atLeastOnce, retain: true, properties: MQTTProperties(contentType: defaultFormat.contentType))
    }

    func publish(_ message: MQTTMessage) {
        do {
            try publisher.send(message)
        } catch {
            metrics.publishFailures.increment()
            logger.error(
                "publish failed", metadata: ["mqtt.topic": "\(message.topic)", "error": "\(error)"])
        }
    }

    private func send(_ topic: Topic, _ bytes: [UInt8], format: PayloadFormat, retain: Bool) {
        send(topicName: topic.name(under: root), bytes, format: format, retain: retain, correlationData: nil)
    }

    private func send(
        topicName: String, _ bytes: [UInt8], format: PayloadFormat, retain: Bool, correlationData: [UInt8]?
    ) {
        publish(
            MQTTMessage(
                topic: topicName, payload: bytes, qos: .atLeastOnce, retain: retain,
                properties: MQTTProperties(contentType: format.contentType, correlationData: correlationData)))
    }
}
