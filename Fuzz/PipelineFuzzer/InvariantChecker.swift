import AccessoryBridge
import AccessoryModel
import AccessoryWire
import Foundation
import MQTTClient
import SwiftProtobuf
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
        var previousCommand: (source: BluetoothAddress, command: Audioaccessory_V1_SwitchCommand)?
        var commandSequences: [BluetoothAddress: UInt64] = [:]
        var commandIDs: Set<String> = []
        var routedSources: [AccessoryID: Data] = [:]
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
            var owners: [Data: AccessoryID] = [:]
            for (id, source) in state.routedSources where !source.isEmpty {
                if let other = owners.updateValue(id, forKey: source) {
                    check(false, "source \(source.hexString) is routed to both \(other) and \(id) (rule 3)", state)
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
        let format: PayloadFormat
        switch message.properties.contentType {
        case PayloadFormat.json.contentType?: format = .json
        case PayloadFormat.protobuf.contentType?: format = .protobuf
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
            guard let result = decode(Audioaccessory_V1_RequestResult.self, message, format, state) else { return }
            switch result.error {
            case .none:
                check(result.hasState, "a success without the accessory's state", state, message)
            case .accessoryNotCapable, .invalidRequest, .invalidated, .unknown:
                check(!result.message.isEmpty, "an error without a message", state, message)
            case .unspecified where result.duplicate:
                check(!result.message.isEmpty, "a duplicate whose outcome is gone, without a message", state, message)
            case .unspecified, .UNRECOGNIZED:
                check(false, "result error \(result.error)", state, message)
            }
            if result.duplicate {
                check(result.hasState, "a duplicate without the accessory's state", state, message)
            }
            if result.hasState {
                check(result.state.accessoryID == accessory.rawValue, "a result with another accessory's state", state,
                    message)
            }

        case .rebirth(let hub):
            guard case .telemetry(hub, _, _) = state.step else {
                return check(false, "a rebirth request to a hub whose telemetry is not being handled", state, message)
            }
            check(format == defaultFormat, "a rebirth request in \(format)", state, message)
            guard let request = decode(Audioaccessory_V1_RebirthRequest.self, message, format, state) else { return }
            check(request.lastSequence < request.receivedSequence, "a rebirth request without a gap", state, message)

        case .accessoryState(let id):
            check(message.retain, "a state that is not retained", state, message)
            guard let published = decode(Audioaccessory_V1_AccessoryState.self, message, format, state) else { return }
            check(published.accessoryID == id.rawValue, "a state on another accessory's topic", state, message)
            check(published.registration != .unspecified, "a state without registration", state, message)
            state.routedSources[id] = published.routedSource
            guard !published.routedSource.isEmpty else { return }
            guard let source = BluetoothAddress(bytes: published.routedSource) else {
                return check(false, "routed source is not an address", state, message)
            }
            do {
                let view = RoutingAccessory(try published.accessory(restoredAt: clock.now, gracePeriod: gracePeriod))
                check(view.isWorn, "routed to an accessory that does not take part or is not worn", state, message)
                check(view.sources.contains(source), "routed from a source the accessory does not list", state, message)
            } catch {
                check(false, "the published state does not read back: \(error)", state, message)
            }

        case .sourceCommands(let source):
            check(!message.retain, "a retained command", state, message)
            check(format == defaultFormat, "a command in \(format)", state, message)
            guard let command = decode(Audioaccessory_V1_SwitchCommand.self, message, format, state) else { return }
            switch command.action {
            case .routeToAccessory, .pause, .release: break
            case .resume:
                let previous = state.previousCommand
                check(
                    previous?.source == source && previous?.command.action == .routeToAccessory
                        && previous?.command.accessoryID == command.accessoryID,
                    "a RESUME that does not follow its ROUTE", state, message)
            case .unspecified, .UNRECOGNIZED:
                check(false, "command action \(command.action)", state, message)
            }
            switch command.reason {
            case .unspecified, .UNRECOGNIZED: check(false, "command reason \(command.reason)", state, message)
            default: break
            }
            check(AccessoryID(command.accessoryID) != nil, "a command for an invalid accessory id", state, message)
            check(command.issuedAtUnixMs == clock.now.unixMilliseconds, "a command not issued now", state, message)
            check(state.commandIDs.insert(command.commandID).inserted, "a repeated command id", state, message)
            let last = state.commandSequences.updateValue(command.sequence, forKey: source) ?? 0
            check(command.sequence > last, "command sequence \(command.sequence) after \(last)", state, message)
            state.previousCommand = (source, command)

        case .responses:
            check(false, "a response on a topic no request named", state, message)

        case .telemetry, .hubStatus, .sourceState, .bridgeStatus:
            check(false, "published on a topic the bridge only reads, or the service's own", state, message)
        }
    }

    private func decode<M: SwiftProtobuf.Message>(
        _ type: M.Type, _ message: MQTTMessage, _ format: PayloadFormat, _ state: State
    ) -> M? {
        do {
            return try codec.decode(M.self, from: message.payload, format: format)
        } catch {
            check(false, "does not decode as \(M.protoMessageName): \(error)", state, message)
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
