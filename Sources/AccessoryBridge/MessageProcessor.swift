import AccessoryModel
import AccessoryWire
import CoreMetrics
import Logging
import MQTTClient
import SwiftProtobuf
import Synchronization

/// What the bridge does with each message: read it, apply it to the accessory's lane and the routing engine, and
/// publish what follows. Runs on libmosquitto's network thread (one message at a time) and, for deadlines, on the
/// timer loop; the lanes and the routing lock keep the two apart.
///
/// Bad input never changes state: it gets a clear result where the topic names an accessory, a log line with the
/// topic, and a counter.
///
/// ``AccessoryBridgeService`` runs one against an MQTT client; it can also run against any ``MessagePublisher``
/// (tests, fuzzing, embedding).
public final class MessageProcessor: Sendable {
    private let root: TopicRoot
    private let codec: WireCodec
    private let defaultFormat: PayloadFormat
    private let clock: WallClock
    private let logger: Logger
    private let metrics: BridgeMetrics
    private let outbox: Outbox
    private let lanes: AccessoryLanes
    private let routing: Mutex<RoutingState>
    private let rebirthInterval: Duration
    let scheduler = DeadlineScheduler()

    private struct RoutingState: Sendable {
        var engine: RoutingEngine
        var scheduledDeadline: Timestamp?
    }

    public init(
        configuration: BridgeConfiguration, instanceID: String, publisher: any MessagePublisher, clock: WallClock,
        logger: Logger, metrics factory: any MetricsFactory
    ) {
        root = configuration.topicRoot
        codec = WireCodec(maximumPayloadSize: configuration.maximumPayloadSize)
        defaultFormat = configuration.payloadFormat
        self.clock = clock
        self.logger = logger
        let metrics = BridgeMetrics(factory: factory)
        self.metrics = metrics
        outbox = Outbox(
            publisher: publisher, root: configuration.topicRoot, codec: codec, defaultFormat: configuration.payloadFormat,
            metrics: metrics, logger: logger)
        var policy = AccessoryStateMachine.Policy()
        policy.diagnosticsGracePeriod = configuration.diagnosticsGracePeriod
        lanes = AccessoryLanes(policy: policy)
        rebirthInterval = configuration.rebirthInterval
        // Command sequences start above the time in ms × 1000, so that they keep increasing across restarts.
        let base = UInt64(max(0, clock.now.unixMilliseconds)) * 1000
        routing = Mutex(
            RoutingState(
                engine: RoutingEngine(
                    policy: .init(resumeWindow: configuration.resumeWindow), instanceID: instanceID,
                    commandSequenceBase: base)))
    }

    var outboxForStatus: Outbox { outbox }

    // MARK: - Inbound

    /// Handles one inbound message.
    public func handle(_ message: MQTTMessage) {
        let topic: Topic
        do {
            topic = try Topic(parsing: message.topic, under: root)
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
            telemetry(message, hub: hub, accessory: accessory)
        case .hubStatus(let hub):
            metrics.received["hub_status"]?.increment()
            hubStatus(message, hub: hub)
        case .sourceState(let source):
            metrics.received["source_state"]?.increment()
            sourceState(message, source: source)
        case .result, .rebirth, .accessoryState, .sourceCommands, .bridgeStatus:
            logger.debug("ignored a message the bridge does not consume", metadata: ["mqtt.topic": "\(message.topic)"])
        }
    }

    private func telemetry(_ message: MQTTMessage, hub: HubID, accessory id: AccessoryID) {
        let now = clock.now
        let format: PayloadFormat
        let telemetry: InboundTelemetry
        do {
            format = try PayloadFormat.detect(contentType: message.properties.contentType, payload: message.payload)
        } catch {
            refuse(message, .contentType, error.reason)
            answer(message, hub: hub, accessory: id, requestID: "", sequence: 0, .invalidRequest(reason: error.reason),
                format: defaultFormat)
            return
        }
        do {
            telemetry = try codec.readTelemetry(from: message.payload, format: format, for: id)
        } catch {
            refuse(message, Self.refusal(error), error.reason)
            answer(message, hub: hub, accessory: id, requestID: "", sequence: 0, .invalidRequest(reason: error.reason),
                format: format)
            return
        }
        let request: AccessoryRequest
        switch telemetry.request {
        case .success(let made):
            request = made
        case .failure(let error):
            refuse(message, .value, error.reason)
            answer(message, hub: hub, accessory: id, requestID: telemetry.requestID, sequence: telemetry.sequence, error,
                format: format)
            return
        }

        // Only a pairing can bring an accessory into existence; anything else about an unknown one fails in a
        // throwaway machine, so bad input cannot grow the bridge's state.
        let lane: AccessoryLane
        if let existing = lanes.existing(id) {
            lane = existing
        } else if case .paired = request {
            lane = lanes.lane(for: id)
        } else {
            var unknown = AccessoryStateMachine(id: id)
            let error: AccessoryControlError
            do {
                try unknown.apply(request, sequence: telemetry.sequence, from: hub, at: now)
                error = .unknown(reason: "accessory \(id) was created by a request other than a pairing")
            } catch let failure {
                error = failure
            }
            logger.info(
                "request about an unknown accessory",
                metadata: [
                    "mqtt.topic": "\(message.topic)", "accessory.id": "\(id)", "request": "\(request.name)",
                    "error": "\(error.code.rawValue)", "reason": "\(error.reason)",
                ])
            answer(message, hub: hub, accessory: id, requestID: telemetry.requestID, sequence: telemetry.sequence,
                error, format: format)
            return
        }

        let isBirth: Bool
        if case .paired = request { isBirth = true } else { isBirth = false }
        let rerouted: [AccessoryID] = lane.withLock { state in
            switch state.sequences.verdict(for: telemetry.sequence, isBirth: isBirth) {
            case .duplicate(let last):
                duplicate(message, telemetry, of: &state, last: last, hub: hub, format: format)
                return []
            case .gap(let missing):
                gap(missing, before: telemetry.sequence, in: &state, hub: hub, at: now)
            case .unsequenced, .next, .birth:
                break
            }
            var rerouted: [AccessoryID] = []
            let error: AccessoryControlError?
            var stateBytes: [UInt8]?
            let routedSource: BluetoothAddress?
            do throws(AccessoryControlError) {
                let accessory = try state.machine.apply(request, sequence: telemetry.sequence, from: hub, at: now)
                error = nil
                routedSource = route(RoutingAccessory(accessory), of: &state, at: now, rerouted: &rerouted)
                stateBytes = outbox.publishState(accessory, routedSource: routedSource, as: format)
                reschedule(&state)
            } catch let failure {
                error = failure
                routedSource = self.routedSource(of: id)
                logger.info(
                    "request failed",
                    metadata: [
                        "mqtt.topic": "\(message.topic)", "accessory.id": "\(id)", "hub.id": "\(hub)",
                        "request": "\(request.name)", "error": "\(failure.code.rawValue)", "reason": "\(failure.reason)",
                    ])
            }
            let current = state.machine.accessory
            let result = outbox.publishResult(
                hub: hub, accessory: id, requestID: telemetry.requestID, sequence: telemetry.sequence, error: error,
                state: current.map { ($0, routedSource, stateBytes) }, format: format,
                replyTo: message.properties)
            // A failure consumes its sequence too: the hub did send it.
            state.sequences.record(telemetry.sequence, isBirth: isBirth)
            state.recentResults.record(.init(sequence: telemetry.sequence, format: format, bytes: result))
            return rerouted
        }
        if lane.withLock({ $0.machine.accessory == nil }) {
            lanes.remove(id)
        }
        republish(rerouted, except: id, at: now)
    }

    private func hubStatus(_ message: MQTTMessage, hub: HubID) {
        // An empty payload is a HubStatus with every field at its default: offline (which is also what clearing a
        // hub's retained status should mean).
        let status: Audioaccessory_V1_HubStatus
        do {
            status = try read(Audioaccessory_V1_HubStatus.self, from: message)
        } catch {
            refuse(message, Self.refusal(error), error.reason)
            return
        }
        let now = clock.now
        logger.info("hub status", metadata: ["hub.id": "\(hub)", "online": "\(status.online)"])
        var rerouted: [AccessoryID] = []
        for lane in lanes.all {
            let changed: [AccessoryID] = lane.withLock { state in
                guard let accessory = state.machine.hubAvailabilityChanged(hub, online: status.online, at: now) else {
                    return []
                }
                var changed: [AccessoryID] = []
                let routedSource = route(RoutingAccessory(accessory), of: &state, at: now, rerouted: &changed)
                outbox.publishState(accessory, routedSource: routedSource, as: defaultFormat)
                reschedule(&state)
                return changed.filter { $0 != accessory.id }
            }
            rerouted += changed
        }
        republish(rerouted, except: nil, at: now)
    }

    private func sourceState(_ message: MQTTMessage, source: BluetoothAddress) {
        // An empty payload is a SourceState that says nothing (no activity, no route): it changes nothing.
        let report: SourceReport
        do {
            report = try read(Audioaccessory_V1_SourceState.self, from: message).report()
        } catch let error as WireError {
            refuse(message, Self.refusal(error), error.reason)
            return
        } catch let error as AccessoryControlError {
            refuse(message, .value, error.reason)
            return
        } catch {
            refuse(message, .value, "\(error)")
            return
        }
        let now = clock.now
        let rerouted: [AccessoryID] = routing.withLock { routing in
            let output = routing.engine.sourceReported(report, from: source, at: now)
            output.commands.forEach(outbox.publishCommand)
            reschedule(&routing)
            return output.rerouted
        }
        republish(rerouted, except: nil, at: now)
    }

    /// A repeat of a request already processed: nothing changes, and it gets the first one's result again (or, when
    /// that is no longer kept, an error that says why nothing happened).
    private func duplicate(
        _ message: MQTTMessage, _ telemetry: InboundTelemetry, of state: inout AccessoryLane.State,
        last: UInt64, hub: HubID, format: PayloadFormat
    ) {
        metrics.duplicates.increment()
        let id = state.machine.id
        logger.info(
            "duplicate telemetry",
            metadata: [
                "mqtt.topic": "\(message.topic)", "accessory.id": "\(id)", "sequence": "\(telemetry.sequence)",
                "last_sequence": "\(last)",
            ])
        if let first = state.recentResults.result(for: telemetry.sequence) {
            outbox.resendResult(first.bytes, format: first.format, hub: hub, accessory: id, replyTo: message.properties)
            return
        }
        let error = AccessoryControlError.invalidRequest(
            reason: "sequence \(telemetry.sequence) is not above \(last), the last one processed: a duplicate or an "
                + "out-of-order message; nothing changed")
        outbox.publishResult(
            hub: hub, accessory: id, requestID: telemetry.requestID, sequence: telemetry.sequence, error: error,
            state: state.machine.accessory.map { ($0, routedSource(of: id), nil) }, format: format,
            replyTo: message.properties)
    }

    /// Telemetry beyond the next sequence: some never arrived. It is applied, and the hub asked to send everything
    /// again (at most once per accessory per interval).
    private func gap(
        _ missing: ClosedRange<UInt64>, before sequence: UInt64, in state: inout AccessoryLane.State, hub: HubID,
        at now: Timestamp
    ) {
        metrics.gaps.increment()
        let id = state.machine.id
        logger.warning(
            "gap in a hub's sequence",
            metadata: [
                "accessory.id": "\(id)", "hub.id": "\(hub)", "missing": "\(missing.lowerBound)...\(missing.upperBound)",
            ])
        if let last = state.lastRebirthRequest, now < last + rebirthInterval { return }
        state.lastRebirthRequest = now
        let count = missing.upperBound - missing.lowerBound + 1
        outbox.publishRebirthRequest(
            hub: hub,
            .with {
                $0.accessoryID = id.rawValue
                $0.lastSequence = missing.lowerBound - 1
                $0.receivedSequence = sequence
                $0.reason = "sequence \(sequence) follows \(missing.lowerBound - 1): \(count) message\(count == 1 ? "" : "s") "
                    + "missing; send Paired, Register and a full update again"
            })
    }

    // MARK: - Restoring

    /// Rebuilds accessories and playing devices from their retained states, read before any telemetry: publishes
    /// nothing, sends no command. Returns how many of each were restored and how many messages were unusable.
    public func restore(accessoryStates: [MQTTMessage], sourceStates: [MQTTMessage])
        -> (accessories: Int, sources: Int, skipped: Int)
    {
        let now = clock.now
        var skipped = 0
        var sources = 0
        var accessories = 0
        routing.withLock { routing in
            // Devices first: what a device says it is routed to wins over what the bridge remembers sending.
            for message in sourceStates {
                guard case .sourceState(let source)? = try? Topic(parsing: message.topic, under: root),
                    let report = try? read(Audioaccessory_V1_SourceState.self, from: message).report()
                else {
                    skipped += 1
                    continue
                }
                routing.engine.restoreSource(report, from: source, at: now)
                sources += 1
            }
        }
        for message in accessoryStates {
            guard case .accessoryState(let id)? = try? Topic(parsing: message.topic, under: root),
                let state = try? read(Audioaccessory_V1_AccessoryState.self, from: message),
                let accessory = try? state.accessory(restoredAt: now, gracePeriod: lanes.policy.diagnosticsGracePeriod),
                accessory.id == id
            else {
                skipped += 1
                logger.warning("ignored an unusable retained state", metadata: ["mqtt.topic": "\(message.topic)"])
                continue
            }
            let lane = AccessoryLane(restoring: accessory, policy: lanes.policy)
            lanes.insert(lane)
            routing.withLock { routing in
                routing.engine.restore(
                    RoutingAccessory(accessory), routedSource: BluetoothAddress(bytes: state.routedSource), at: now)
            }
            lane.withLock { reschedule(&$0) }
            accessories += 1
        }
        return (accessories, sources, skipped)
    }

    // MARK: - Time

    /// Raises what came due at `now`: diagnostics of accessories, the end of resume windows.
    public func tick() {
        let now = clock.now
        for owner in scheduler.takeDue(at: now) {
            switch owner {
            case .routing:
                routing.withLock { routing in
                    routing.scheduledDeadline = nil
                    _ = routing.engine.tick(at: now)
                    reschedule(&routing)
                }
            case .accessory(let id):
                lanes.existing(id)?.withLock { state in
                    state.scheduledDeadline = nil
                    if let accessory = state.machine.tick(at: now) {
                        outbox.publishState(accessory, routedSource: routedSource(of: id), as: defaultFormat)
                    }
                    reschedule(&state)
                }
            }
        }
    }

    // MARK: - Helpers

    /// Runs the routing engine for a changed accessory (its lane's `state`) and publishes its commands, in order,
    /// under the routing lock. Returns the accessory's routed source and collects the accessories whose route
    /// changed.
    private func route(
        _ view: RoutingAccessory, of state: inout AccessoryLane.State, at now: Timestamp,
        rerouted: inout [AccessoryID]
    ) -> BluetoothAddress? {
        routing.withLock { routing in
            let output = routing.engine.accessoryChanged(view, at: now, slotHint: state.routingSlot)
            state.routingSlot = output.accessorySlot
            output.commands.forEach(outbox.publishCommand)
            reschedule(&routing)
            rerouted = output.rerouted
            return output.routedSource
        }
    }

    private func routedSource(of id: AccessoryID) -> BluetoothAddress? {
        routing.withLock { $0.engine.routedSource(for: id) }
    }

    /// Publishes again the state of accessories whose routed source changed, each under its own lane.
    private func republish(_ ids: [AccessoryID], except skipped: AccessoryID?, at now: Timestamp) {
        for id in ids where id != skipped {
            lanes.existing(id)?.withLock { state in
                guard let accessory = state.machine.accessory else { return }
                outbox.publishState(accessory, routedSource: routedSource(of: id), as: defaultFormat)
            }
        }
    }

    private func reschedule(_ state: inout AccessoryLane.State) {
        let next = state.machine.nextDeadline
        guard next != state.scheduledDeadline else { return }
        state.scheduledDeadline = next
        if let next {
            scheduler.schedule(.accessory(state.machine.id), at: next)
        }
    }

    private func reschedule(_ routing: inout RoutingState) {
        let next = routing.engine.nextDeadline
        guard next != routing.scheduledDeadline else { return }
        routing.scheduledDeadline = next
        if let next {
            scheduler.schedule(.routing, at: next)
        }
    }

    /// Decodes a message's payload in the format its content type or first byte says.
    private func read<M: SwiftProtobuf.Message>(_ type: M.Type, from message: MQTTMessage) throws(WireError) -> M {
        let format = try PayloadFormat.detect(contentType: message.properties.contentType, payload: message.payload)
        return try codec.decode(M.self, from: message.payload, format: format)
    }

    /// The answer to telemetry that never reached a lane.
    private func answer(
        _ message: MQTTMessage, hub: HubID, accessory id: AccessoryID, requestID: String, sequence: UInt64,
        _ error: AccessoryControlError, format: PayloadFormat
    ) {
        let current = lanes.existing(id)?.withLock { $0.machine.accessory }
        outbox.publishResult(
            hub: hub, accessory: id, requestID: requestID, sequence: sequence, error: error,
            state: current.map { ($0, routedSource(of: id), nil) }, format: format, replyTo: message.properties)
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
        }
    }
}
