import AccessoryModel
import AccessoryWire
import BridgeCore
import MQTTClient

/// Restoring: the retained accessory and source states read at start-up (or when a cluster's slot is taken over),
/// decoded on the reader's thread and taken back by the core before any telemetry; nothing is published.
extension MessageProcessor {
    /// What restoring took back, and what it could not use.
    public struct Restored: Hashable, Sendable {
        /// The accessories the bridge holds once restored: a state read twice (a reader that reconnected, say)
        /// counts once.
        public var accessories = 0
        /// The source states read.
        public var sources = 0
        /// The retained messages that could not be used.
        public var skipped = 0
        /// This bridge's (or slot's) Home Assistant discovery configs read back.
        public var configs = 0
    }

    /// A retained message read at start-up: decoded by ``decodeRetained(_:)``, taken back by
    /// ``restore(_:)-(RetainedMessage)``.
    public struct RetainedMessage: Sendable {
        enum Content: Sendable {
            case accessory(AccessoryState)
            case source(SourceReport, BluetoothAddress, PayloadFormat)
            /// Neither: one of home automation's, or unusable.
            case other(MQTTMessage)
        }

        let content: Content
    }

    /// Decodes one retained accessory or source state. It reads the processor's configuration only, never its state:
    /// the start-up reader's network thread runs it while the task that owns the processor takes back the states
    /// decoded before (see ``RetainedStates``).
    public func decodeRetained(_ message: MQTTMessage) -> RetainedMessage {
        switch try? roots.parse(message.topic) {
        case .sourceState(let source)?:
            if let spoken = try? format(of: message),
                let report = try? codec.decode(SourceReport.self, from: message.payload, format: spoken)
            {
                return RetainedMessage(content: .source(report, source, spoken))
            }
        case .accessoryState(let id)?:
            if let state = try? codec.decode(
                AccessoryState.self, from: message.payload, format: format(of: message), at: clock.now),
                state.accessory.id == id
            {
                return RetainedMessage(content: .accessory(state))
            }
        default:
            break
        }
        return RetainedMessage(content: .other(message))
    }

    /// Takes back one retained accessory or source state, read before any telemetry (and before the client starts):
    /// publishes nothing, sends no command. The order of the states does not matter; call
    /// ``restoringFinished()`` once they are all in.
    public func restore(_ message: MQTTMessage) {
        restore(decodeRetained(message))
    }

    /// Takes back one decoded retained message (see ``restore(_:)-(MQTTMessage)``).
    public func restore(_ retained: RetainedMessage) {
        let now = clock.now
        switch retained.content {
        case .source(let report, let source, let format):
            core.restoreSource(report, from: source, at: now)
            readerFormats.heard(source, in: format)
            restored.sources += 1
        case .accessory(let state):
            core.restore(state, at: now)
        case .other(let message):
            if homeAutomation?.retainedMessageSeen(topic: message.topic, payload: message.payload) == true {
                restored.configs += 1
                return
            }
            restored.skipped += 1
            logger.warning("ignored an unusable retained state", metadata: ["mqtt.topic": "\(message.topic)"])
        }
    }

    /// Every retained state is in: returns how many of each were restored and how many were unusable.
    @discardableResult
    public func restoringFinished() -> Restored {
        core.restoringFinished()
        heapTrimmer.busy()
        restored.accessories = core.accessoryCount
        return restored
    }
}
