import AccessoryModel
import CoreMetrics

/// The bridge's counters, created once. Labels are bounded: message kinds, error codes, actions — never an id.
struct BridgeMetrics: Sendable {
    /// Inbound messages by topic kind (`telemetry`, `hub_status`, `source_state`, `controls`).
    let received: [String: Counter]
    /// Inbound messages refused before they reached the model, by reason.
    let refused: [Refusal: Counter]
    /// Telemetry results by AudioAccessoryKit error (`none` for success).
    let results: [String: Counter]
    /// Switch commands by action.
    let commands: [SwitchCommand.Action: Counter]
    /// Publishes libmosquitto refused (while disconnected: beyond the bound of what waits for the next connection).
    let publishFailures: Counter
    /// MQTT 5 response topics outside the requesting hub's own `R/hubs/{hub}/responses/`, which the bridge ignores.
    let refusedResponseTopics: Counter
    /// Telemetry whose sequence was not above the last one processed.
    let duplicates: Counter
    /// Rebirth requests sent: gaps in a hub's sequences (at most one request per accessory per interval).
    let rebirthRequests: Counter

    enum Refusal: String, CaseIterable, Sendable {
        case topic, contentType = "content_type", tooLarge = "too_large", protobuf, json, value
    }

    init(factory: any MetricsFactory) {
        received = Dictionary(
            uniqueKeysWithValues: ["telemetry", "hub_status", "source_state", "controls"].map {
                ($0, Counter(label: "accessory_bridge_messages_received_total", dimensions: [("kind", $0)], factory: factory))
            })
        refused = Dictionary(
            uniqueKeysWithValues: Refusal.allCases.map {
                ($0, Counter(label: "accessory_bridge_messages_refused_total", dimensions: [("reason", $0.rawValue)], factory: factory))
            })
        results = Dictionary(
            uniqueKeysWithValues: (["none"] + AccessoryControlError.Code.allCases.map(\.rawValue)).map {
                ($0, Counter(label: "accessory_bridge_results_total", dimensions: [("error", $0)], factory: factory))
            })
        commands = Dictionary(
            uniqueKeysWithValues: SwitchCommand.Action.allCases.map {
                ($0, Counter(label: "accessory_bridge_commands_total", dimensions: [("action", "\($0)")], factory: factory))
            })
        publishFailures = Counter(label: "accessory_bridge_publish_failures_total", factory: factory)
        duplicates = Counter(label: "accessory_bridge_duplicates_total", factory: factory)
        refusedResponseTopics = Counter(label: "accessory_bridge_response_topics_refused_total", factory: factory)
        rebirthRequests = Counter(label: "accessory_bridge_rebirth_requests_total", factory: factory)
    }

    func result(_ result: RequestOutcome.Result) {
        results[result.error?.code.rawValue ?? "none"]?.increment()
    }
}
