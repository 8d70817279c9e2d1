import AccessoryModel
import AccessoryWire
import BridgeCore
import MQTTClient

/// Everything the bridge can be told, with the defaults it uses when it is not. Each default is written once: here,
/// or in the policy of the state machine it belongs to.
public struct BridgeConfiguration: Sendable {
    /// The broker connection (host, port, client id, credentials, TLS). The bridge sets the will itself.
    public var mqtt: MQTTConfiguration
    /// The first levels of every topic.
    public var topicRoot: TopicRoot = .default
    /// What the bridge's state machine decides with: the resume and interruption windows (routing rules 4 and 11),
    /// the diagnostics' grace period, the rebirth interval, the grace before an offline hub's accessories turn stale.
    public var policy = BridgeStateMachine.Policy()
    /// The format of the bridge's status and layout, and of what goes to a hub or playing device not heard from since it
    /// started; each one heard from reads the format it speaks (``ReaderFormats``).
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
    /// How long the start-up read of retained states may take before the bridge goes on with what it has.
    public var rebuildTimeout: Duration = .seconds(60)
    /// How often the gauges (accessories, worn, routed, sources, hubs online, queue depth) and the bridge's view are
    /// refreshed, from the counts the state machine keeps. `nil`: never on its own (tests call
    /// ``MessageProcessor/housekeeping()``).
    public var statisticsInterval: Duration? = .seconds(10)

    /// Whether the bridge publishes what home automation reads: accessory views and switch events in plain JSON,
    /// hub and bridge availability, the bridge's view.
    public var homeAutomation = true
    /// Home Assistant MQTT discovery under this prefix (`homeassistant`); `nil`: none.
    public var homeAssistantPrefix: String? = "homeassistant"

    /// The bridge's MQTT client id unless told otherwise: one bridge per id.
    public static let defaultClientID = "accessory-bridge"

    public init(mqtt: MQTTConfiguration = MQTTConfiguration(clientID: defaultClientID)) {
        self.mqtt = mqtt
    }
}
