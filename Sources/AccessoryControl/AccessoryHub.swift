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
        /// Whether the hub reads the slot count from the bridge's retained layout (`R/bridge/layout`, docs/scale-out.md
        /// "The layout hubs read") instead of ``slots``, and follows it, as the C SDK's `AUDIOHUB_SLOTS_FROM_BRIDGE`
        /// does. Until the layout comes, the hub's connection has no will, subscribes to the layout alone and publishes
        /// nothing, and requests wait for it (within ``timeout``). When a layout moves the hub to another slot, the hub
        /// says offline where it was, connects under its new root, says again what it said of each of its accessories
        /// (paired, registered, configured), and sends its requests in flight anew; its accessories' head-tracking
        /// sessions end (each handler's `invalidate()`), and the new root's bridge starts its own.
        public var followsLayout = false
        /// How long to wait for the bridge's answer before failing with `.unknown`.
        public var timeout: Duration = .seconds(5)
        /// The format of the telemetry this hub sends: the bridge answers in it, and sends the hub's session news and
        /// rebirth requests, and its accessories' states, in it (docs/wire-contract.md, "Payloads"; the hub reads both).
        public var payloadFormat: PayloadFormat = .protobuf
        /// Whether this connection speaks for the hub's availability: a retained HubStatus online when connected and
        /// offline when stopped or lost (its will). A hub's long-lived process does; a one-shot tool acting for the
        /// hub must not, or every exit would mark the hub's accessories stale.
        public var announcesStatus = true
        /// Whether the hub answers the bridge's rebirth requests (``rebirthStatus``): a hub's long-lived process does;
        /// a one-shot tool acting for the hub should not, since the gap the bridge saw is its own new run, and the
        /// hub's process answers for the accessory.
        public var answersRebirthRequests = true
        /// Whether requests carry a sequence (the bridge's ``SequenceTracker``): a hub's long-lived process's do; a
        /// one-shot tool acting for the hub sends them unsequenced (0), since its run is not the hub's: a count of its
        /// own would be a gap to the bridge (a rebirth request to the hub), and would move the accessory's count past
        /// the hub's own.
        public var sequencesRequests = true

        public init() {}

        /// The root of `hub`'s topics: its slot's in a cluster, else ``topicRoot`` (with ``followsLayout``, the
        /// bridge's layout decides instead).
        public func root(of hub: HubID) -> TopicRoot {
            slots.map { $0.root(of: hub, under: topicRoot) } ?? topicRoot
        }
    }

    /// What a request waits for: the bridge's result, or the news that the hub moved before it came (it is sent
    /// again under the new root).
    enum Reply: Sendable {
        case result(RequestResult)
        case moved
    }

    public let hubID: HubID
    let options: Options
    /// The connection's settings: each connection of a hub that follows the layout is made from them.
    let mqtt: MQTTConfiguration
    let codec = WireCodec()
    let logger: Logger
    let pending = PendingRequests<[UInt8], Reply>()
    let link = HubLink()
    private let states = Mutex<[AccessoryID: AccessoryState]>([:])
    private let sequences = Mutex<[AccessoryID: UInt64]>([:])
    private let requestCounter = Atomic<UInt64>(0)
    /// The highest ownership epoch of the bridge's results: one of an older owner (cut off since) is dropped.
    let epoch = Atomic<UInt64>(0)
    /// The last part of the hub's response topic, the same under every root.
    private let responseToken = String(UInt64.random(in: .min ... .max), radix: 16)
    /// What each accessory was told to be, for a move (``Options/followsLayout``) and the bridge's rebirth requests.
    let rebirths = Mutex<[AccessoryID: AccessoryRebirth]>([:])
    /// Each accessory's requests on the wire: a rebirth is answered once none is.
    let inFlight = InFlightRequests()
    /// The bridge's rebirth requests: what the hub did with them, and the accessories it is answering for.
    let rebirthAnswers = Mutex(RebirthAnswers())
    /// The layouts the connection received, for the task that follows them (``Options/followsLayout``).
    let layouts = AsyncStream<BridgeLayout>.makeStream(bufferingPolicy: .bufferingNewest(1))
    /// The layout in use, and how many the hub followed or could not read (``Options/followsLayout``).
    let following = Mutex(LayoutStatus())
    /// Its accessories' head-tracking features and sessions.
    let headTracking: HeadTrackingFeatures

    /// Creates the hub's connection; call ``start()`` to connect.
    public init(hubID: HubID, mqtt: MQTTConfiguration, options: Options = Options(), logger: Logger) throws(MQTTError) {
        self.hubID = hubID
        self.options = options
        self.mqtt = mqtt
        self.logger = logger
        // Frames go to the playing devices' topics, under the cluster's root even when the hub's are under a slot's.
        let link = link
        headTracking = HeadTrackingFeatures(
            hub: hubID, sourcesRoot: options.topicRoot,
            publish: { message throws(MQTTError) in try link.publish(message) })
        _ = link.install(try connection(under: options.followsLayout ? nil : options.root(of: hubID)))
    }

    deinit {
        // A hub dropped without stop() still lets go of its connection (the will then says offline).
        layouts.continuation.finish()
        link.stop()?.client.syncClose()
    }

    /// What a hub that follows the bridge's layout has seen of it.
    public struct LayoutStatus: Hashable, Sendable {
        /// The layout the hub's topics are under now (`nil`: none read yet).
        public var layout: BridgeLayout?
        /// How many layouts the hub followed: its first included, and a new count that left it in its slot.
        public var followed = 0
        /// How many times it moved from one root to another (its first root not included).
        public var moves = 0
        /// How many layouts it could not read (each logged; they change nothing).
        public var malformed = 0
    }

    /// What the hub has seen of the bridge's layout (all zero unless it follows it).
    public var layoutStatus: LayoutStatus {
        following.withLock { $0 }
    }

    /// Connects, waits until the broker accepted the connection, and announces the hub online (with
    /// ``Options/followsLayout``, once the layout came: the wait is for the connection that reads it).
    ///
    /// - Parameter timeout: give up after this long (``MQTTError/Kind/notConnected``, naming why the last attempt
    ///   failed); `nil`, wait as long as it takes. Either way a refusal of the credentials ends the wait at once.
    public func start(timeout: Duration? = nil) async throws(MQTTError) {
        guard let connection = link.connection else { throw MQTTError(kind: .disconnected, code: 0, message: "the hub stopped") }
        try open(connection)
        if options.followsLayout {
            let stream = layouts.stream
            Task { [weak self] in
                for await layout in stream {
                    guard let self else { return }
                    await self.move(to: layout)
                }
            }
        } else {
            link.serve()
        }
        try await connection.client.waitUntilConnected(timeout: timeout)
    }

    /// Announces the hub offline (when it announces its status) and disconnects. Every head-tracking session of its
    /// features is invalidated first (each handler's `invalidate()`), and the features are let go.
    public func stop() async {
        layouts.continuation.finish()
        headTracking.stop()
        guard let connection = link.stop() else { return }
        if options.announcesStatus, let root = connection.root {
            _ = try? connection.client.publish(status(online: false, under: root))
        }
        await connection.client.close()
    }

    /// A connection under `root` (`nil`: one that learns the layout, without a will), not started.
    func connection(under root: TopicRoot?) throws(MQTTError) -> HubLink.Connection {
        var mqtt = mqtt
        mqtt.will = root.flatMap { options.announcesStatus ? status(online: false, under: $0) : nil }
        return HubLink.Connection(
            client: try MQTTClient(configuration: mqtt, logger: logger), root: root,
            responseTopic: root.map { Topic.responses(hub: hubID, name: responseToken).name(under: $0) })
    }

    /// Subscribes and starts `connection`'s client: under a root, to the hub's responses, its rebirth requests and its
    /// accessories' head-tracking news (and it announces the hub online at each connection); following the layout, to
    /// the layout.
    func open(_ connection: HubLink.Connection) throws(MQTTError) {
        let client = connection.client
        let root = connection.root
        if let root, let responseTopic = connection.responseTopic {
            try client.subscribe(responseTopic, qos: .atLeastOnce)
            if options.answersRebirthRequests {
                try client.subscribe(Topic.rebirth(hub: hubID).name(under: root), qos: .atLeastOnce)
            }
            try client.subscribe(Topic.Kind.headTracking.filter(under: root, hub: hubID), qos: .atLeastOnce)
        }
        if options.followsLayout {
            try client.subscribe(Topic.bridgeLayout.name(under: options.topicRoot), qos: .atLeastOnce)
        }
        let online = root.flatMap { options.announcesStatus ? status(online: true, under: $0) : nil }
        // Weak: the client keeps its handler until it is closed.
        try client.start(
            onEvent: { [weak client] event in
                if case .connected = event, let online { _ = try? client?.publish(online) }
            },
            onMessage: { [weak self] in self?.receive($0, on: connection) })
    }

    /// The hub's retained HubStatus under `root`.
    func status(online: Bool, under root: TopicRoot) -> MQTTMessage {
        let format = options.payloadFormat
        return MQTTMessage(
            topic: Topic.hubStatus(hub: hubID).name(under: root),
            payload: codec.encode(HubStatus(online: online, since: WallClock.system.now), as: format), qos: .atLeastOnce,
            retain: true, properties: MQTTProperties(contentType: format.contentType))
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

    /// Sends one request and waits for its result; a result with an error throws it. What the bridge accepted is kept
    /// for a move and the bridge's rebirth requests, and a request the hub moved before its answer came goes again
    /// under the new root.
    @discardableResult
    func send(_ request: AccessoryRequest, for id: AccessoryID) async throws(AccessoryControlError)
        -> RequestResult
    {
        while true {
            guard let connection = await link.serving(within: options.timeout), connection.root != nil else {
                throw AccessoryControlError.unknown(
                    reason: options.followsLayout && layoutStatus.layout == nil
                        ? "no bridge's layout within \(options.timeout): is a bridge running?"
                        : "the hub is stopped, or moving to another slot for longer than \(options.timeout)")
            }
            let reply = try await inFlight.run(for: id) { () async throws(AccessoryControlError) in
                try await send(request, for: id, on: connection)
            }
            guard case .result(let result) = reply else { continue }
            // A duplicate: this hub does not send a sequence twice, so a run before it counted further (the count
            // started behind the bridge's). Nothing was applied: the request goes again past the bridge's count.
            if result.duplicate, let last = result.state?.accessory.lastSequence, last >= result.sequence {
                movePast(last, for: id)
                continue
            }
            if case .succeeded = result.outcome {
                rebirths.withLock { rebirths in
                    // A hub that restarted learns the accessory from the bridge's state in the first result.
                    var rebirth =
                        rebirths[id] ?? result.state.flatMap(AccessoryRebirth.init(learning:)) ?? AccessoryRebirth()
                    rebirth.took(request, sequence: result.state?.accessory.lastSequence ?? 0)
                    rebirths[id] = rebirth.isPaired ? rebirth : nil
                }
            }
            switch result.outcome {
            case .succeeded: return result
            case .failed(let error): throw error
            case .notKept(let reason): throw AccessoryControlError.unknown(reason: reason)
            }
        }
    }

    /// Sends one request on `connection` (one under a root), and waits for the bridge's reply (or the news of a move).
    func send(
        _ request: AccessoryRequest, for id: AccessoryID, on connection: HubLink.Connection
    ) async throws(AccessoryControlError) -> Reply {
        guard let root = connection.root, let responseTopic = connection.responseTopic else {
            return .moved  // a connection that learns the layout sends nothing: the request waits for one that does
        }
        let client = connection.client
        let number = requestCounter.wrappingAdd(1, ordering: .relaxed).newValue
        let requestID = "\(hubID)-\(number)"
        let correlation = Array(requestID.utf8)
        let payload = codec.encodeTelemetry(
            request, sequence: options.sequencesRequests ? nextSequence(for: id) : 0, requestID: requestID,
            as: options.payloadFormat)
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
        let reply = try outcome.get()
        if case .result(let result) = reply, let state = result.state {
            states.withLock { $0[id] = state }
        }
        return reply
    }

    /// A message on `connection` (one under a root, or one that learns the layout).
    private func receive(_ message: MQTTMessage, on connection: HubLink.Connection) {
        if options.followsLayout, message.topic == Topic.bridgeLayout.name(under: options.topicRoot) {
            receiveLayout(message)
            return
        }
        guard let root = connection.root else { return }
        guard message.topic == connection.responseTopic else {
            switch try? Topic(parsing: message.topic, under: root) {
            case .headTracking(let hub, let accessory)? where hub == hubID: receiveHeadTracking(message, of: accessory)
            case .rebirth(let hub)? where hub == hubID: receiveRebirthRequest(message)
            default: break
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
            pending.finish(correlation, with: .success(.result(result)))
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

    /// Sequences count by one per accessory from the wall clock in milliseconds at its first request of this run, so
    /// that they keep increasing across restarts of the hub, and the bridge sees a gap (and asks for a rebirth) only
    /// at a restart. (Until 2026-11-30 every request took the wall clock when it was ahead: nearly every request after
    /// a pause was a gap to the bridge.) A run that counted further than the clock went is found out by the first
    /// answer, a duplicate: the count moves past the bridge's (``movePast(_:for:)``) and the request goes again.
    private func nextSequence(for id: AccessoryID) -> UInt64 {
        let now = UInt64(max(0, WallClock.system.now.unixMilliseconds))
        return sequences.withLock { sequences in
            let next = sequences[id].map { $0 &+ 1 } ?? now
            sequences[id] = next
            return next
        }
    }

    /// The bridge processed `last` of `id` already: the next sequence is past it.
    private func movePast(_ last: UInt64, for id: AccessoryID) {
        sequences.withLock { $0[id] = max($0[id] ?? 0, last) }
    }
}

extension AccessoryHub: Hashable {
    public static func == (lhs: AccessoryHub, rhs: AccessoryHub) -> Bool { lhs === rhs }
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }
}

