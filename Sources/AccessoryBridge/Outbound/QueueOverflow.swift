import Logging
import MQTTClient

/// What the log says while the client's outbound queue is full: one line when it starts refusing publishes and one
/// when it has room again, with how many it refused, rather than a line for each. An overload of a minute refuses
/// millions of publishes (docs/performance-history.md, "One log line per queue overflow"); the count of each stays in
/// `accessory_bridge_publish_failures_total`.
///
/// What was refused is not lost for good: a state goes out again and a command is owed once the queue drains
/// (``BridgeStateMachine/notSent(_:)``); an answer is dropped, and a hub's retry of its request gets the outcome.
// @unchecked Sendable: used only by the thread that owns the bridge's MessageProcessor (see there), through the
// copies of one Outbox.
final class QueueOverflow: @unchecked Sendable {
    private var refused = 0
    private var since: ContinuousClock.Instant?

    /// The queue refused `message`: logs it when it is the first refusal since the queue last had room.
    func refused(_ message: MQTTMessage, _ error: MQTTError, logger: Logger) {
        refused += 1
        guard since == nil else { return }
        since = .now
        logger.warning(
            "the outbound queue is full: refusing what the bridge publishes until it has room",
            metadata: [
                "mqtt.topic": "\(message.topic)", "error": "\(error)",
                "meanwhile": """
                    answers are dropped (a hub that retries gets the outcome); states and commands go out once it \
                    drains
                    """,
            ])
    }

    /// The queue has room again: logs how many publishes it refused, and for how long.
    func drained(logger: Logger) {
        guard let since else { return }
        logger.warning(
            "the outbound queue has room again",
            metadata: [
                "refused": "\(refused)",
                "duration_ms": "\((ContinuousClock.now - since).wholeMilliseconds)",
            ])
        refused = 0
        self.since = nil
    }
}
