import AccessoryModel
import AccessoryWire
import BridgeCore
import Logging
import MQTTClient
import Metrics

/// Inbound: each message read (topic, payload format, payload) and handed to the core as an event, with the request
/// its answer goes to; what etcd said about the slot's shared devices, handed over the same way.
extension MessageProcessor {
    /// Handles one inbound message.
    public func handle(_ message: MQTTMessage) {
        owner.check()
        // What etcd said about shared devices comes first: a message must meet the routes as they stand.
        takeSharedDeviceEvents()
        let receivedAt = ContinuousClock.now
        self.receivedAt = receivedAt
        heapTrimmer.busy()
        defer {
            self.receivedAt = nil
            metrics.handling.record(duration: ContinuousClock.now - receivedAt)
        }
        if homeAutomation?.isHomeAssistantStatus(message.topic) == true {
            // Home Assistant (re)started ("online"): it needs every device again.
            let (accessories, hubs) = (core.accessoryIDs, core.hubsOnline)
            publish(homeAutomation?.homeAssistantStatus(message.payload, accessories: accessories, hubsOnline: hubs))
            announcingBegan(accessories.count)
            return
        }
        let topic: Topic
        do {
            topic = try roots.parse(message.topic)
        } catch {
            metrics.refused[.topic]?.increment()
            logger.warning(
                "refused a message on a topic outside the contract",
                metadata: ["mqtt.topic": "\(message.topic)", "reason": "\(error.reason)"])
            return
        }
        switch topic {
        case .telemetry(let hub, let accessory):
            metrics.received["telemetry"]?.increment()
            if core.refusal(of: hub) != nil { metrics.refused[.slot]?.increment() }
            telemetry(message, hub: hub, accessory: accessory)
        case .hubStatus(let hub):
            metrics.received["hub_status"]?.increment()
            hubStatus(message, hub: hub)
        case .sourceState(let source):
            metrics.received["source_state"]?.increment()
            sourceState(message, source: source)
        case .controls(let accessory):
            metrics.received["controls"]?.increment()
            controls(message, accessory: accessory)
        case .result, .rebirth, .responses, .accessoryState, .sourceCommands, .bridgeStatus, .bridgeLayout,
            .controlsResult, .accessoryView, .accessoryEvents, .hubAvailability, .bridgeAvailability, .bridgeView,
            .headTracking, .hostHeadTracking, .frames:
            logger.debug("ignored a message the bridge does not consume", metadata: ["mqtt.topic": "\(message.topic)"])
        }
    }

    /// In a cluster, runs what etcd said about the slot's shared devices since the last time, then what the core's
    /// gate lets go once etcd has every listing, in order.
    public func takeSharedDeviceEvents() {
        guard let events = sharedDevices?.take(), !events.isEmpty else { return }
        for event in events {
            perform(core.sharedDevice(event, at: clock.now))
        }
        while let released = core.nextReleased(at: clock.now) {
            perform(released)
        }
    }

    // MARK: - Each topic

    private func telemetry(_ message: MQTTMessage, hub: HubID, accessory id: AccessoryID) {
        // Whatever is wrong with the message, the core answers it: it alone knows what this hub may see.
        let responseTopic = ResponseTopic(message.properties.responseTopic, of: hub, under: root)
        if case .refused(let refused) = responseTopic {
            metrics.refusedResponseTopics.increment()
            logger.warning(
                "refused a response topic outside the hub's own",
                metadata: [
                    "mqtt.response_topic": "\(refused)", "hub.id": "\(hub)",
                    "allowed": "\(Topic.Kind.responses.filter(under: root, hub: hub))",
                ])
        }
        var request = Request(
            message: message, replyTo: .hub(hub, responseTopic: responseTopic), accessory: id,
            format: readerFormats.format(of: hub))
        let telemetry: InboundTelemetry
        do {
            request.format = try PayloadFormat.detect(
                contentType: message.properties.contentType, payload: message.payload)
            telemetry = try codec.readTelemetry(from: message.payload, format: request.format, for: id)
            readerFormats.heard(hub, in: request.format)
            if case .failure(let error) = telemetry.request {
                refuse(message, .value, error.reason)
            }
        } catch {
            refuse(message, Self.refusal(error), error.reason)
            telemetry = InboundTelemetry(
                sequence: 0, requestID: "", request: .failure(.invalidRequest(reason: error.reason)))
        }
        request.requestID = telemetry.requestID
        request.sequence = telemetry.sequence
        requests.append(request)
        perform(core.telemetry(telemetry.request, sequence: telemetry.sequence, from: hub, about: id, at: clock.now))
        readerFormats.settled(hub, known: core.knows(hub))
    }

    private func controls(_ message: MQTTMessage, accessory id: AccessoryID) {
        var request = Request(
            message: message, replyTo: .controls, accessory: id, format: readerFormats.defaultFormat)
        let controls: Result<AccessoryControls, AccessoryControlError>
        do {
            request.format = try format(of: message)
            let decoded = try codec.decode(ControlsRequest.self, from: message.payload, format: request.format)
            request.requestID = decoded.requestID
            controls = .success(decoded.controls)
        } catch {
            refuse(message, Self.refusal(error), error.reason)
            controls = .failure(.invalidRequest(reason: error.reason))
        }
        requests.append(request)
        perform(core.controls(controls, for: id, at: clock.now))
    }

    private func hubStatus(_ message: MQTTMessage, hub: HubID) {
        if let refusal = core.refusal(of: hub) {
            refuse(message, .slot, refusal.reason)
            return
        }
        // An empty payload is a HubStatus with every field at its default: offline (which is also what clearing a
        // hub's retained status should mean).
        let status: HubStatus
        do {
            let spoken = try format(of: message)
            status = try codec.decode(HubStatus.self, from: message.payload, format: spoken)
            readerFormats.heard(hub, in: spoken)
        } catch {
            refuse(message, Self.refusal(error), error.reason)
            return
        }
        logger.info("hub status", metadata: ["hub.id": "\(hub)", "online": "\(status.online)"])
        perform(core.hubStatus(hub, online: status.online, at: clock.now))
        readerFormats.settled(hub, known: core.knows(hub))
        publish(homeAutomation?.hubStatus(hub, online: status.online))
    }

    private func sourceState(_ message: MQTTMessage, source: BluetoothAddress) {
        // An empty payload is a SourceState that says nothing (no activity, no route): it changes nothing.
        let report: SourceReport
        do {
            let spoken = try format(of: message)
            report = try codec.decode(SourceReport.self, from: message.payload, format: spoken)
            readerFormats.heard(source, in: spoken)
        } catch {
            refuse(message, Self.refusal(error), error.reason)
            return
        }
        perform(core.sourceReported(report, from: source, at: clock.now))
    }

    // MARK: - Helpers

    /// The format a message's content type or first byte says.
    func format(of message: MQTTMessage) throws(WireError) -> PayloadFormat {
        try PayloadFormat.detect(contentType: message.properties.contentType, payload: message.payload)
    }

    private func refuse(_ message: MQTTMessage, _ reason: BridgeMetrics.Refusal, _ explanation: String) {
        metrics.refused[reason]?.increment()
        logger.warning(
            "refused a message", metadata: ["mqtt.topic": "\(message.topic)", "reason": "\(explanation)"])
    }

    private static func refusal(_ error: WireError) -> BridgeMetrics.Refusal {
        switch error.kind {
        case .unsupportedContentType: .contentType
        case .tooLarge: .tooLarge
        case .malformedProtobuf: .protobuf
        case .malformedJSON: .json
        case .invalidValue: .value
        }
    }
}
