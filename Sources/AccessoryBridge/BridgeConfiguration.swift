import AccessoryModel
import AccessoryWire
import MQTTClient

/// Everything the bridge can be told, with the defaults it uses when it is not.
public struct BridgeConfiguration: Sendable {
    /// The broker connection (host, port, client id, credentials, TLS). The bridge sets the will itself.
    public var mqtt: MQTTConfiguration
    /// The first levels of every topic.
    public var topicRoot: TopicRoot = .default
    /// How long after taking an accessory off putting it back on also resumes playback (routing rule 4).
    public var resumeWindow: Duration = .seconds(15)
    /// How long after a call displaced media its end still brings the media back (routing rule 11).
    public var interruptionWindow: Duration = .seconds(300)
    /// How long a declared capability may go unreported before it gets a diagnostic.
    public var diagnosticsGracePeriod: Duration = .seconds(30)
    /// The format of commands, and of states and results that no request's format decides.
    public var payloadFormat: PayloadFormat = .protobuf
    /// The largest inbound payload accepted, in bytes.
    public var maximumPayloadSize: Int = 64 * 1024
    /// The bridge's version, in its BridgeStatus.
    public var version: String = Release.version
    /// How long the broker keeps the bridge's session (its subscriptions and the telemetry that arrives meanwhile)
    /// while the bridge is away.
    public var sessionExpiry: Duration = .seconds(24 * 60 * 60)
    /// Whether what the bridge publishes leaves through a second connection (``MQTTConfiguration/publishingSession``),
    /// so that it can stop reading while the broker takes its messages slower than the telemetry comes: what it does
    /// not read waits at the broker, and no answer is dropped. Without it, an overload drops answers.
    public var publishingSession = true
    /// At most one rebirth request per accessory per interval, however many gaps its telemetry shows.
    public var rebirthInterval: Duration = .seconds(10)
    /// How long the start-up read of retained states may take before the bridge goes on with what it has.
    public var rebuildTimeout: Duration = .seconds(60)
    /// How often the gauges (accessories, worn, routed, sources, hubs online, queue depth) and the bridge's view are
    /// refreshed: each refresh walks every accessory once. `nil`: never on its own (tests call
    /// ``MessageProcessor/housekeeping()``).
    public var statisticsInterval: Duration? = .seconds(10)

    /// Whether the bridge publishes what home automation reads: accessory views and switch events in plain JSON,
    /// hub and bridge availability, the bridge's view.
    public var homeAutomation = true
    /// Home Assistant MQTT discovery under this prefix (`homeassistant`); `nil`: none.
    public var homeAssistantPrefix: String? = "homeassistant"

    public init(mqtt: MQTTConfiguration) {
        self.mqtt = mqtt
    }
}
