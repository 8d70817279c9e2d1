import AccessoryBridge
import AccessoryModel
import AccessoryWire
import Foundation
import MQTTClient
import Synchronization

/// The publisher the fuzzed bridge sends to: it keeps nothing but a few counters and the last routed source of each
/// accessory, and aborts (a crash for libFuzzer) when what the bridge publishes breaks the contract.
///
/// Checked for every published message:
/// - it goes to the request's response topic, or to a topic of the contract the bridge publishes on (result,
///   rebirth, accessory state, source commands), with content type `application/json` or `application/protobuf`;
/// - a result answers the telemetry being handled, on that hub's and accessory's topic, once; it decodes as a
///   `RequestResult`, says success or a known error, carries the accessory's state on success, and its copy on the
///   response topic is the same bytes with the request's correlation data;
/// - a rebirth request goes to the hub whose telemetry is being handled and names an earlier sequence;
/// - an accessory state is retained, decodes, is about the accessory its topic names, and is routed only from a
///   source it lists while it takes part and is worn (routing rules 1 to 3);
/// - a switch command decodes in the bridge's default format, names an action, a reason and a valid accessory, is
///   issued now, has a new id and a higher sequence than the source's previous command, and a RESUME follows the
///   ROUTE of the same source and accessory.
///
/// After every step: a telemetry message got exactly one result; restoring published nothing; no source is routed
/// to two accessories by their latest states (rule 3).
final class InvariantChecker: MessagePublisher {
    /// One bridge reads every playing device through one filter: it never subscribes per device.
    func subscribe(_ filter: String) throws(MQTTError) {
        preconditionFailure("a single bridge subscribed to \(filter)")
    }

    func unsubscribe(_ filter: String) throws(MQTTError) {
        preconditionFailure("a single bridge unsubscribed from \(filter)")
    }

    /// What the bridge is doing while it publishes.
    enum Step: Sendable {
        case telemetry(hub: HubID, accessory: AccessoryID, properties: MQTTProperties)
        /// Any other inbound message, or tick().
        case other
        case restoring
    }

    private struct State: Sendable {
        var step = Step.other
        var stepDescription: @Sendable () -> String = { "" }
        var results = 0
        var lastResult: [UInt8]?
        var published = 0
        var previousCommand: SwitchCommand?
        var commandSequences: [BluetoothAddress: UInt64] = [:]
        var commandIDs: Set<String> = []
        var routedSources: [AccessoryID: BluetoothAddress] = [:]
    }

    private let state = Mutex(State())
    private let root: TopicRoot
    private let defaultFormat: PayloadFormat
    private let clock: FuzzClock
    private let codec = WireCodec()
    private let gracePeriod: Duration

    init(root: TopicRoot, defaultFormat: PayloadFormat, gracePeriod: Duration, clock: FuzzClock) {
        self.root = root
        self.defaultFormat = defaultFormat
        self.gracePeriod = gracePeriod
        self.clock = clock
    }

    /// Runs `body` as one step of the script and checks what it published.
    func step(_ step: Step, _ description: @escaping @Sendable () -> String, _ body: () -> Void) {
        state.withLock {
            $0.step = step
            $0.stepDescription = description
            $0.results = 0
            $0.lastResult = nil
            $0.published = 0
            $0.previousCommand = nil
        }
        body()
        state.withLock { state in
            switch state.step {
            case .telemetry:
                check(state.results == 1, "telemetry got \(state.results) results", state)
            case .restoring:
                check(state.published == 0, "restoring published \(state.published) messages", state)
            case .other:
                break
            }
            var owners: [BluetoothAddress: AccessoryID] = [:]
            for (id, source) in state.routedSources {
                if let other = owners.updateValue(id, forKey: source) {
                    check(false, "source \(source) is routed to both \(other) and \(id) (rule 3)", state)
                }
            }
        }
    }

    func send(_ message: MQTTMessage) throws(MQTTError) {
        state.withLock { state in
            state.published += 1
            inspect(message, &state)
        }
    }

    private func inspect(_ message: MQTTMessage, _ state: inout State) {
        if message.topic.hasPrefix("homeassistant/device/") {
            // Home Assistant discovery: retained JSON objects, or empty (a removal).
            check(message.retain, "a discovery config that is not retained", state, message)
            check(message.payload.isEmpty || isJSONObject(message.payload), "discovery that is not JSON", state, message)
            return
        }
        let format: PayloadFormat
        switch message.properties.contentType {
        case PayloadFormat.json.contentType?: format = .json
        case PayloadFormat.protobuf.contentType?: format = .protobuf
        case nil where message.payload.isEmpty: format = .json  // a home automation view removed
        default:
            let contentType = String(describing: message.properties.contentType)
            return check(false, "content type \(contentType)", state, message)
        }

        if message.topic == FuzzInput.responseTopic {
            guard case .telemetry(_, _, let properties) = state.step, properties.responseTopic == message.topic else {
                return check(false, "a message on the response topic of no request", state, message)
            }
            check(state.lastResult == message.payload, "the response differs from the result", state, message)
            check(message.properties.correlationData == properties.correlationData, "correlation data", state, message)
            return
        }

        let topic: Topic
        do {
            topic = try Topic(parsing: message.topic, under: root)
        } catch {
            return check(false, "published on a topic outside the contract: \(error)", state, message)
        }
        switch topic {
        case .result(let hub, let accessory):
            guard case .telemetry(hub, accessory, _) = state.step else {
                return check(false, "a result for no telemetry, or for another one", state, message)
            }
            state.results += 1
            state.lastResult = message.payload
            check(!message.retain, "a retained result", state, message)
            let now = clock.now
            guard let result = decode(message, state, { try codec.decode(RequestResult.self, from: $0, format: format, at: now) })
            else { return }
            switch result.outcome {
            case .succeeded:
                check(result.state != nil, "a success without the accessory's state", state, message)
            case .failed(let error):
                check(!error.reason.isEmpty, "an error without a message", state, message)
            case .notKept(let reason):
                check(result.duplicate && !reason.isEmpty, "an unknown outcome that is not a described duplicate", state,
                    message)
            }
            if result.duplicate {
                check(result.state != nil, "a duplicate without the accessory's state", state, message)
            }
            if let published = result.state {
                check(published.accessory.id == accessory, "a result with another accessory's state", state, message)
            }

        case .rebirth(let hub):
            guard case .telemetry(hub, _, _) = state.step else {
                return check(false, "a rebirth request to a hub whose telemetry is not being handled", state, message)
            }
            check(format == defaultFormat, "a rebirth request in \(format)", state, message)
            guard let request = decode(message, state, { try codec.decode(RebirthRequest.self, from: $0, format: format) })
            else { return }
            check(request.lastSequence < request.receivedSequence, "a rebirth request without a gap", state, message)

        case .accessoryState(let id):
            check(message.retain, "a state that is not retained", state, message)
            let now = clock.now
            guard
                let published = decode(
                    message, state, { try codec.decode(AccessoryState.self, from: $0, format: format, at: now) })
            else { return }
            check(published.accessory.id == id, "a state on another accessory's topic", state, message)
            state.routedSources[id] = published.routedSource
            guard let source = published.routedSource else { return }
            let view = RoutingAccessory(published.accessory)
            check(view.isWorn, "routed to an accessory that does not take part or is not worn", state, message)
            check(view.sources.contains(source), "routed from a source the accessory does not list", state, message)

        case .sourceCommands(let source):
            check(!message.retain, "a retained command", state, message)
            check(format == defaultFormat, "a command in \(format)", state, message)
            guard
                let command = decode(
                    message, state, { try codec.decode(SwitchCommand.self, from: $0, format: format, source: source) })
            else { return }
            if command.action == .resume {
                let previous = state.previousCommand
                check(
                    previous?.source == source && previous?.action == .routeToAccessory
                        && previous?.accessoryID == command.accessoryID,
                    "a RESUME that does not follow its ROUTE", state, message)
            }
            check(command.issuedAt == clock.now, "a command not issued now", state, message)
            check(state.commandIDs.insert(command.id).inserted, "a repeated command id", state, message)
            let last = state.commandSequences.updateValue(command.sequence, forKey: source) ?? 0
            check(command.sequence > last, "command sequence \(command.sequence) after \(last)", state, message)
            state.previousCommand = command

        case .responses:
            check(false, "a response on a topic no request named", state, message)

        case .accessoryView(let id):
            check(message.retain, "a view that is not retained", state, message)
            guard !message.payload.isEmpty else { return }
            let view = (try? JSONSerialization.jsonObject(with: Data(message.payload))) as? [String: Any]
            check(view?["accessory"] as? String == id.rawValue, "a view of another accessory, or not JSON", state, message)

        case .accessoryEvents:
            check(!message.retain, "a retained event", state, message)
            let event = (try? JSONSerialization.jsonObject(with: Data(message.payload))) as? [String: Any]
            check(
                ["route_to_accessory", "pause", "resume", "release", "head_tracking_activated",
                 "head_tracking_state_changed", "head_tracking_invalidated"].contains(event?["event_type"] as? String ?? ""),
                "an event without a known event_type", state, message)

        case .hubAvailability:
            check(message.retain && ["online", "offline"].contains(String(decoding: message.payload, as: UTF8.self)),
                "hub availability that is not a retained online/offline", state, message)

        case .bridgeView:
            check(message.retain && isJSONObject(message.payload), "a bridge view that is not retained JSON", state, message)

        case .headTracking(let hub, let accessory):
            check(!message.retain, "retained session news", state, message)
            guard let (event, named) = decode(message, state, { try codec.decode(HeadTrackingEvent.self, from: $0, format: format) })
            else { return }
            check(event.session.accessory == accessory && named == hub, "session news of another accessory or hub", state, message)

        case .hostHeadTracking(let host):
            check(!message.retain, "retained session news", state, message)
            guard let (event, _) = decode(message, state, { try codec.decode(HeadTrackingEvent.self, from: $0, format: format) })
            else { return }
            check(event.session.host == host, "session news to another host", state, message)

        case .frames:
            check(false, "the bridge published a head-tracking frame: frames never pass through it", state, message)

        case .controlsResult, .controls, .bridgeAvailability:
            check(false, "published on a topic it only reads or another connection writes", state, message)

        case .telemetry, .hubStatus, .sourceState, .bridgeStatus, .bridgeLayout:
            check(false, "published on a topic the bridge only reads, or the service's own", state, message)
        }
    }

    private func isJSONObject(_ payload: [UInt8]) -> Bool {
        (try? JSONSerialization.jsonObject(with: Data(payload))) is [String: Any]
    }

    /// What `read` makes of the message's payload, or a violation: everything the bridge publishes must read back.
    private func decode<T>(
        _ message: MQTTMessage, _ state: State, _ read: ([UInt8]) throws -> T
    ) -> T? {
        do {
            return try read(message.payload)
        } catch {
            check(false, "does not read back: \(error)", state, message)
            return nil
        }
    }

    /// Aborts with what was being done and what was published when `condition` is false.
    private func check(
        _ condition: Bool, _ violation: @autoclosure () -> String, _ state: State, _ message: MQTTMessage? = nil
    ) {
        guard !condition else { return }
        var report = "pipeline-fuzzer: invariant violated: \(violation())\n"
        report += "  while handling: \(state.stepDescription())\n"
        if let message {
            report += "  published: \(message.topic) retain=\(message.retain) "
                + "content-type=\(message.properties.contentType ?? "-") payload=\(message.payload.hexString)\n"
            if message.properties.contentType == PayloadFormat.json.contentType {
                report += "  payload text: \(String(decoding: message.payload, as: UTF8.self))\n"
            }
        }
        FileHandle.standardError.write(Data(report.utf8))
        fatalError("pipeline-fuzzer: invariant violated")
    }
}

extension Sequence<UInt8> {
    var hexString: String {
        map { String($0, radix: 16).count == 1 ? "0" + String($0, radix: 16) : String($0, radix: 16) }.joined()
    }
}
