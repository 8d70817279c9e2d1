import AccessoryModel
import AccessoryWire
import BridgeCore
import CoreMetrics
import Synchronization

/// The bridge's metrics, created once. Labels are bounded: message kinds, error codes, actions, registrations,
/// activities — never an accessory, hub or source id, nor a slot. In a cluster, every slot an instance serves counts
/// into the same counters, and adds its share into the same gauges (``Share``), taken back when it stops: a member's
/// gauges are the sum of its slots', and the cluster's the sum of its members'. (A `slot` label made a series per slot
/// and gauge — 11,000 at 1,024 slots — and swift-prometheus copies a metric's series each time it adds one: a quarter
/// of a member's CPU while it took up 1,024 slots.)
struct BridgeMetrics: Sendable {
    /// One bridge's (one slot's) share of a gauge that every slot served in the process adds into: it records its own
    /// value as the difference from the last one it recorded.
    final class Share: Sendable {
        private let meter: Meter
        private let value = Atomic<Int>(0)

        init(label: String, dimensions: [(String, String)] = [], factory: any MetricsFactory) {
            meter = Meter(label: label, dimensions: dimensions, factory: factory)
        }

        func record(_ new: Int) {
            let old = value.exchange(new, ordering: .relaxed)
            if new > old {
                meter.increment(by: Double(new - old))
            } else if new < old {
                meter.decrement(by: Double(old - new))
            }
        }
    }

    /// Inbound messages by topic kind (`telemetry`, `hub_status`, `source_state`, `controls`).
    let received: [String: Counter]
    /// Inbound messages refused before they reached the model, by reason.
    let refused: [Refusal: Counter]
    /// Telemetry results by AudioAccessoryKit error (`none` for success).
    let results: [String: Counter]
    /// Switch commands by action.
    let commands: [SwitchCommand.Action: Counter]
    /// Head-tracking session news by event (rule 13).
    let headTracking: [HeadTrackingEvent.Kind: Counter]
    /// Publishes the MQTT client refused: its queue full (beyond the bound of what waits, connected or not), or
    /// libmosquitto refusing the message.
    let publishFailures: Counter
    /// MQTT 5 response topics outside the requesting hub's own `R/hubs/{hub}/responses/`, which the bridge ignores.
    let refusedResponseTopics: Counter
    /// Telemetry whose sequence was not above the last one processed.
    let duplicates: Counter
    /// Rebirth requests sent: gaps in a hub's sequences (at most one request per accessory per interval).
    let rebirthRequests: Counter

    // Gauges, refreshed every ``BridgeConfiguration/statisticsInterval`` (and the connection's on each change).
    /// Accessories by registration.
    let accessories: [Registration: Share]
    /// Accessories worn (in ear, on head, over the ear) and taking part in routing.
    let worn: Share
    /// Accessories a source is routed to.
    let routed: Share
    /// Playing devices some accessory lists, by their last reported activity.
    let sources: [Activity: Share]
    /// Hubs whose retained status says online.
    let hubsOnline: Share
    /// 1 while connected to the broker, else 0 (a member: how many of its slots are).
    let brokerConnected: Share
    /// Connections to the broker after the first.
    let reconnects: Counter
    /// Messages waiting in the MQTT client beyond the send window (or for the next connection).
    let outboundQueueDepth: Share

    // Histograms.
    /// From receiving an inbound message (telemetry, a source report, controls) to having handled it: decoded,
    /// applied, and every answer, state and command handed to the MQTT client.
    let handling: Timer
    /// From receiving an inbound message to handing a command it caused to the MQTT client (one sample per command).
    let toCommand: Timer

    /// The histograms' labels and their buckets: the bridge handles a message in microseconds, far below the
    /// 5 ms – 10 s that Prometheus clients use by default.
    static let histogramBuckets: [String: [Duration]] = {
        let buckets: [Duration] = [
            .microseconds(10), .microseconds(25), .microseconds(50), .microseconds(100), .microseconds(250),
            .microseconds(500), .milliseconds(1), .microseconds(2500), .milliseconds(5), .milliseconds(10),
            .milliseconds(25), .milliseconds(100), .seconds(1),
        ]
        return [Label.handling: buckets, Label.toCommand: buckets]
    }()

    enum Label {
        static let handling = "accessory_bridge_message_handling_seconds"
        static let toCommand = "accessory_bridge_message_to_command_seconds"
    }

    enum Refusal: String, CaseIterable, Sendable {
        case topic, contentType = "content_type", tooLarge = "too_large", protobuf, json, value
        /// In a cluster: a hub's message on another slot's topics.
        case slot
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
        headTracking = Dictionary(
            uniqueKeysWithValues: HeadTrackingEvent.Kind.allCases.map {
                ($0, Counter(label: "accessory_bridge_head_tracking_total", dimensions: [("event", "\($0)")], factory: factory))
            })
        publishFailures = Counter(label: "accessory_bridge_publish_failures_total", factory: factory)
        duplicates = Counter(label: "accessory_bridge_duplicates_total", factory: factory)
        refusedResponseTopics = Counter(label: "accessory_bridge_response_topics_refused_total", factory: factory)
        rebirthRequests = Counter(label: "accessory_bridge_rebirth_requests_total", factory: factory)

        accessories = Dictionary(
            uniqueKeysWithValues: Registration.allCases.map {
                ($0, Share(label: "accessory_bridge_accessories", dimensions: [("registration", "\($0)")], factory: factory))
            })
        worn = Share(label: "accessory_bridge_accessories_worn", factory: factory)
        routed = Share(label: "accessory_bridge_accessories_routed", factory: factory)
        sources = Dictionary(
            uniqueKeysWithValues: Activity.allCases.map {
                ($0, Share(label: "accessory_bridge_sources", dimensions: [("activity", "\($0)")], factory: factory))
            })
        hubsOnline = Share(label: "accessory_bridge_hubs_online", factory: factory)
        brokerConnected = Share(label: "accessory_bridge_broker_connected", factory: factory)
        reconnects = Counter(label: "accessory_bridge_broker_reconnects_total", factory: factory)
        outboundQueueDepth = Share(label: "accessory_bridge_outbound_queue_depth", factory: factory)
        handling = Timer(label: Label.handling, factory: factory)
        toCommand = Timer(label: Label.toCommand, factory: factory)
        Gauge(label: "accessory_bridge_info", dimensions: [("version", Release.version)], factory: factory).record(1)
    }

    /// Sets the gauges of the bridge's state.
    func record(_ statistics: BridgeStateMachine.Statistics, hubsOnline: Int, outboundQueueDepth: Int) {
        for (registration, gauge) in accessories { gauge.record(statistics.byRegistration[registration, default: 0]) }
        worn.record(statistics.worn)
        routed.record(statistics.routed)
        for (activity, gauge) in sources { gauge.record(statistics.sourcesByActivity[activity, default: 0]) }
        self.hubsOnline.record(hubsOnline)
        self.outboundQueueDepth.record(outboundQueueDepth)
    }

    /// The bridge (a cluster's slot) stopped here: its shares of the gauges are taken back.
    func zeroGauges() {
        record(BridgeStateMachine.Statistics(), hubsOnline: 0, outboundQueueDepth: 0)
        brokerConnected.record(0)
    }

    func result(_ result: RequestOutcome.Result) {
        results[result.error?.code.rawValue ?? "none"]?.increment()
    }
}

