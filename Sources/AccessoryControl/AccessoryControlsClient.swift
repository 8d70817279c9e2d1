import AccessoryModel
import AccessoryWire
import Logging
import MQTTClient
import Synchronization

/// The person's controls of accessories over MQTT, as home automation sets them: automatic switching on or off
/// (AudioAccessoryKit's "automatic" versus "when last connected") and a pinned source. Each change is a request on
/// `R/accessories/{id}/controls`, answered on `R/accessories/{id}/controls/result` with the accessory's state.
///
/// ```swift
/// let controls = try AccessoryControlsClient(mqtt: mqtt, logger: logger)
/// try await controls.start()
/// let state = try await controls.set(AccessoryControls(automaticSwitching: false), for: "headphones")
/// ```
public final class AccessoryControlsClient: Sendable {
    private let root: TopicRoot
    private let timeout: Duration
    private let format: PayloadFormat
    private let client: MQTTClient
    private let codec = WireCodec()
    private let logger: Logger
    private let pending = PendingRequests<String, RequestResult>()
    private let token = String(UInt64.random(in: .min ... .max), radix: 16)
    private let counter = Atomic<UInt64>(0)

    /// Creates the connection; call ``start()`` to connect.
    public init(
        mqtt: MQTTConfiguration, topicRoot: TopicRoot = .default, timeout: Duration = .seconds(5),
        payloadFormat: PayloadFormat = .protobuf, logger: Logger
    ) throws(MQTTError) {
        root = topicRoot
        self.timeout = timeout
        format = payloadFormat
        self.logger = logger
        client = try MQTTClient(configuration: mqtt, logger: logger)
    }

    deinit {
        client.syncClose()
    }

    /// Connects and waits until the broker accepted the connection. (The subscription to the answers is sent before
    /// any request on the same connection, so the broker has it in place before a request arrives.)
    ///
    /// - Parameter timeout: give up after this long (``MQTTError/Kind/notConnected``, naming why the last attempt
    ///   failed); `nil`, wait as long as it takes. Either way a refusal of the credentials ends the wait at once.
    public func start(timeout: Duration? = nil) async throws(MQTTError) {
        try client.subscribe(Topic.Kind.controlsResult.filter(under: root), qos: .atLeastOnce)
        try client.start(onEvent: { _ in }, onMessage: { [weak self] in self?.receive($0) })
        try await client.waitUntilConnected(timeout: timeout)
    }

    public func stop() async {
        await client.close()
    }

    /// Changes the controls of accessory `id` (a `nil` control stays as it is) and returns its state after the
    /// change. Throws the bridge's refusal (`.invalidRequest` for an accessory that is not paired, say), or
    /// `.unknown` when no answer comes in time.
    @discardableResult
    public func set(_ controls: AccessoryControls, for id: AccessoryID) async throws(AccessoryControlError)
        -> AccessoryState
    {
        let requestID = "controls-\(token)-\(counter.wrappingAdd(1, ordering: .relaxed).newValue)"
        let message = MQTTMessage(
            topic: Topic.controls(accessory: id).name(under: root),
            payload: codec.encode(ControlsRequest(requestID: requestID, controls: controls), as: format),
            qos: .atLeastOnce, properties: MQTTProperties(contentType: format.contentType))
        let (client, timeout) = (client, timeout)
        let result = try await pending.send(
            requestID, timeout: timeout,
            timeoutReason: { "the bridge did not answer the controls of \(id) within \(timeout)" },
            publish: { try client.publish(message) }
        ).get()
        switch result.outcome {
        case .succeeded: break
        case .failed(let error): throw error
        case .notKept(let reason): throw AccessoryControlError.unknown(reason: reason)
        }
        guard let state = result.state else {
            throw AccessoryControlError.unknown(reason: "the bridge's answer has no state of \(id)")
        }
        return state
    }

    private func receive(_ message: MQTTMessage) {
        do {
            let format = try PayloadFormat.detect(contentType: message.properties.contentType, payload: message.payload)
            let result = try codec.decode(
                RequestResult.self, from: message.payload, format: format, at: WallClock.system.now)
            // Answers to other clients' requests share the topic: only this client's ids wait here.
            pending.finish(result.requestID, with: .success(result))
        } catch {
            logger.warning("unreadable controls result from the bridge", metadata: ["mqtt.topic": "\(message.topic)"])
        }
    }
}
