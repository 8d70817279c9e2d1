import AccessoryModel
import AccessoryWire
import Logging
import MQTTClient
import Synchronization

/// A hub's connection to the bridge: it announces the hub (a retained HubStatus, offline by its will; see
/// ``Options/announcesStatus``), sends each
/// accessory's telemetry with a sequence and a request id, and waits for the bridge's RequestResult through MQTT 5
/// request/response (a response topic of its own and correlation data).
///
/// ``AccessoryControlDevice`` is the AudioAccessoryKit-shaped API on top; ``pair(_:name:model:hardwareCapabilities:)``
/// stands in for AccessorySetupKit. It also takes the bridge's news of its accessories' head-tracking sessions
/// (`R/hubs/{hub}/accessories/+/headtracking`) for their ``AudioAccessoryHeadTracking`` features.
public final class AccessoryHub: Sendable {
    /// How a hub connects and talks.
    public struct Options: Sendable {
        public var topicRoot: TopicRoot = .default
        /// The number of slots of the cluster of bridges this hub talks to (docs/scale-out.md), or `nil` for a single
        /// bridge: then the hub's topics live under its slot's root, `R/slots/{FNV-1a-64(hub id) mod slots}`.
        public var slots: ClusterSlots?
        /// How long to wait for the bridge's answer before failing with `.unknown`.
        public var timeout: Duration = .seconds(5)
        /// The format of the telemetry this hub sends (the bridge answers in the same format).
        public var payloadFormat: PayloadFormat = .protobuf
        /// Whether this connection speaks for the hub's availability: a retained HubStatus online when connected and
        /// offline when stopped or lost (its will). A hub's long-lived process does; a one-shot tool acting for the
        /// hub must not, or every exit would mark the hub's accessories stale.
        public var announcesStatus = true

        public init() {}

        /// The root of `hub`'s topics: its slot's in a cluster, else ``topicRoot``.
        public func root(of hub: HubID) -> TopicRoot {
            slots.map { $0.root(of: hub, under: topicRoot) } ?? topicRoot
        }
    }

    public let hubID: HubID
    private let options: Options
    private let client: MQTTClient
    private let responseTopic: String
    private let codec = WireCodec()
    private let logger: Logger
    private let pending = PendingRequests<[UInt8], RequestResult>()
    private let states = Mutex<[AccessoryID: AccessoryState]>([:])
    private let sequences = Mutex<[AccessoryID: UInt64]>([:])
    private let requestCounter = Atomic<UInt64>(0)
    /// The highest ownership epoch of the bridge's results: one of an older owner (cut off since) is dropped.
    private let epoch = Atomic<UInt64>(0)
    /// The root of this hub's topics (see ``Options/root(of:)``).
    private let root: TopicRoot
    /// Its accessories' head-tracking features and sessions.
    let headTracking: HeadTrackingFeatures

    /// Creates the hub's connection; call ``start()`` to connect.
    public init(hubID: HubID, mqtt: MQTTConfiguration, options: Options = Options(), logger: Logger) throws(MQTTError) {
        self.hubID = hubID
        self.options = options
        self.logger = logger
        root = options.root(of: hubID)
        let token = String(UInt64.random(in: .min ... .max), radix: 16)
        responseTopic = Topic.responses(hub: hubID, name: token).name(under: root)
        var mqtt = mqtt
        if options.announcesStatus {
            mqtt.will = Self.status(online: false, of: hubID, options: options)
        }
        let client = try MQTTClient(configuration: mqtt, logger: logger)
        self.client = client
        // Frames go to the playing devices' topics, under the cluster's root even when the hub's are under a slot's.
        headTracking = HeadTrackingFeatures(
            hub: hubID, sourcesRoot: options.topicRoot,
            publish: { message throws(MQTTError) in try client.publish(message) })
    }

    deinit {
        // A hub dropped without stop() still lets go of its connection (the will then says offline).
        client.syncClose()
    }

    /// Connects, waits until the broker accepted the connection, and announces the hub online.
    ///
    /// - Parameter timeout: give up after this long (``MQTTError/Kind/notConnected``, naming why the last attempt
    ///   failed); `nil`, wait as long as it takes. Either way a refusal of the credentials ends the wait at once.
    public func start(timeout: Duration? = nil) async throws(MQTTError) {
        try client.subscribe(responseTopic, qos: .atLeastOnce)
        try client.subscribe(Topic.Kind.headTracking.filter(under: root, hub: hubID), qos: .atLeastOnce)
        let (hubID, options) = (hubID, options)
        // Weak: the hub owns the client, which keeps its handler until it is closed.
        try client.start(
            onEvent: { [weak self] event in
                if case .connected = event, options.announcesStatus {
                    _ = try? self?.client.publish(Self.status(online: true, of: hubID, options: options))
                }
            },
            onMessage: { [weak self] in self?.receive($0) })
        try await client.waitUntilConnected(timeout: timeout)
    }

    /// Announces the hub offline (when it announces its status) and disconnects. Every head-tracking session of its
    /// features is invalidated first (each handler's `invalidate()`), and the features are let go.
    public func stop() async {
        headTracking.stop()
        if options.announcesStatus {
            _ = try? client.publish(Self.status(online: false, of: hubID, options: options))
        }
        await client.close()
    }

    /// The hub's retained HubStatus.
    private static func status(online: Bool, of hub: HubID, options: Options) -> MQTTMessage {
        let status = HubStatus(online: online, since: WallClock.system.now)
        return MQTTMessage(
            topic: Topic.hubStatus(hub: hub).name(under: options.root(of: hub)),
            payload: WireCodec().encode(status, as: options.payloadFormat), qos: .atLeastOnce, retain: true,
            properties: MQTTProperties(contentType: options.payloadFormat.contentType))
    }

    // MARK: - AccessorySetupKit's part

    /// Reports that AccessorySetupKit pairing finished, and returns the accessory to register.
    public func pair(
        _ id: AccessoryID, name: String, model: String, hardwareCapabilities: Capabilities
    ) async throws(AccessoryControlError) -> PairedAccessory {
        _ = try await send(.paired(name: name, model: model, hardwareCapabilities: hardwareCapabilities), for: id)
        return PairedAccessory(id: id, hub: self)
    }

    /// The accessory was removed: its registration ends.
    public func unpair(_ accessory: PairedAccessory) async throws(AccessoryControlError) {
        _ = try await send(.unpaired, for: accessory.id)
    }

    /// A paired accessory by id, for an accessory paired earlier (for example by another run of this program).
    public func accessory(_ id: AccessoryID) -> PairedAccessory {
        PairedAccessory(id: id, hub: self)
    }

    // MARK: - Partial updates (PlacementReport and SourcesReport)

    /// Reports the placement alone (`nil`: none).
    public func report(placement: Placement?, for accessory: PairedAccessory) async throws(AccessoryControlError) {
        _ = try await send(.placement(placement), for: accessory.id)
    }

    /// Reports the connected audio sources alone.
    public func report(
        primary: BluetoothAddress?, secondary: BluetoothAddress?, for accessory: PairedAccessory
    ) async throws(AccessoryControlError) {
        _ = try await send(.sources(primary: primary?.data, secondary: secondary?.data), for: accessory.id)
    }

    /// `AccessoryControlDevice.register(_:_:)` with capabilities, with its error typed.
    public func register(_ accessory: PairedAccessory, _ capabilities: Capabilities) async throws(AccessoryControlError) {
        _ = try await send(.register(capabilities), for: accessory.id)
    }

    /// `AccessoryControlDevice.register(_:_:)` with a configuration (iOS 27), with its error typed: registers its
    /// capabilities and spatial extension; when it also has a placement or sources, a full update with it follows
    /// (so the configuration is the accessory's afterwards, as registering it on the system makes it).
    public func register(
        _ accessory: PairedAccessory, _ configuration: Configuration
    ) async throws(AccessoryControlError) {
        _ = try await send(
            .register(
                configuration.deviceCapabilities,
                spatialExtensionDescription: configuration.spatialExtensionDescription),
            for: accessory.id)
        if configuration.devicePlacement != nil || configuration.primaryAudioSourceDeviceIdentifier != nil
            || configuration.secondaryAudioSourceDeviceIdentifier != nil
        {
            _ = try await send(.update(configuration), for: accessory.id)
        }
    }

    /// `AccessoryControlDevice.update(_:)` without a device: for tools that have not read the state first.
    public func update(_ configuration: Configuration, for accessory: PairedAccessory) async throws(AccessoryControlError) {
        _ = try await send(.update(configuration), for: accessory.id)
    }

    /// What the bridge last said about `id` to this hub.
    public func lastKnownState(of id: AccessoryID) -> AccessoryState? {
        states.withLock { $0[id] }
    }

    // MARK: - Request and response

    /// Sends one request and waits for its result; a result with an error throws it.
    @discardableResult
    func send(_ request: AccessoryRequest, for id: AccessoryID) async throws(AccessoryControlError)
        -> RequestResult
    {
        let number = requestCounter.wrappingAdd(1, ordering: .relaxed).newValue
        let requestID = "\(hubID)-\(number)"
        let correlation = Array(requestID.utf8)
        let payload = codec.encodeTelemetry(
            request, sequence: nextSequence(for: id), requestID: requestID, as: options.payloadFormat)
        let message = MQTTMessage(
            topic: Topic.telemetry(hub: hubID, accessory: id).name(under: root),
            payload: payload, qos: .atLeastOnce,
            properties: MQTTProperties(
                contentType: options.payloadFormat.contentType, responseTopic: responseTopic,
                correlationData: correlation))
        let timeout = options.timeout
        let outcome = await pending.send(
            correlation, timeout: timeout,
            timeoutReason: { "the bridge did not answer \(request.name) within \(timeout)" },
            publish: { try client.publish(message) })
        let result = try outcome.get()
        if let state = result.state {
            states.withLock { $0[id] = state }
        }
        switch result.outcome {
        case .succeeded: break
        case .failed(let error): throw error
        case .notKept(let reason): throw AccessoryControlError.unknown(reason: reason)
        }
        return result
    }

    private func receive(_ message: MQTTMessage) {
        guard message.topic == responseTopic else {
            if case .headTracking(let hub, let accessory)? = try? Topic(parsing: message.topic, under: root),
                hub == hubID
            {
                receiveHeadTracking(message, of: accessory)
            }
            return
        }
        guard let correlation = message.properties.correlationData else { return }
        do {
            let format = try PayloadFormat.detect(contentType: message.properties.contentType, payload: message.payload)
            let result = try codec.decode(
                RequestResult.self, from: message.payload, format: format, at: WallClock.system.now)
            let highest = epoch.max(result.epoch, ordering: .relaxed).newValue
            guard result.epoch >= highest else {
                // An owner that lost the hub's slot since answered: the new owner answers a retry.
                logger.warning(
                    "dropped a result of an older owner of the hub's slot",
                    metadata: ["epoch": "\(result.epoch)", "current_epoch": "\(highest)"])
                return
            }
            pending.finish(correlation, with: .success(result))
        } catch {
            logger.warning("unreadable result from the bridge", metadata: ["error": "\(error)"])
            pending.finish(correlation, with: .failure(.unknown(reason: "the bridge's answer is unreadable: \(error)")))
        }
    }

    /// The bridge's news of a head-tracking session of `accessory` (on the network thread: it never waits).
    private func receiveHeadTracking(_ message: MQTTMessage, of accessory: AccessoryID) {
        let event: HeadTrackingEvent
        do {
            let format = try PayloadFormat.detect(contentType: message.properties.contentType, payload: message.payload)
            let (news, hub) = try codec.decode(HeadTrackingEvent.self, from: message.payload, format: format)
            guard news.session.accessory == accessory, hub == nil || hub == hubID else {
                logger.warning(
                    "dropped head-tracking news of another accessory or hub than its topic's",
                    metadata: ["mqtt.topic": "\(message.topic)"])
                return
            }
            event = news
        } catch {
            logger.warning(
                "unreadable head-tracking news from the bridge",
                metadata: ["mqtt.topic": "\(message.topic)", "error": "\(error)"])
            return
        }
        if case .stale(let last) = headTracking.receive(event) {
            logger.debug(
                "dropped head-tracking news older than the last taken",
                metadata: ["accessory.id": "\(accessory)", "order": "\(event.session.order)", "last": "\(last)"])
        }
    }

    /// Sequences increase per accessory, starting from the wall clock in milliseconds, so that they keep increasing
    /// across restarts of the hub.
    private func nextSequence(for id: AccessoryID) -> UInt64 {
        let now = UInt64(max(0, WallClock.system.now.unixMilliseconds))
        return sequences.withLock { sequences in
            let next = max(sequences[id, default: 0] + 1, now)
            sequences[id] = next
            return next
        }
    }
}

extension AccessoryHub: Hashable {
    public static func == (lhs: AccessoryHub, rhs: AccessoryHub) -> Bool { lhs === rhs }
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }
}

