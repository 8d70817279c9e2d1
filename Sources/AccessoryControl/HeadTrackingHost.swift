import AccessoryModel
import AccessoryWire
import Foundation
import Logging
import MQTTClient
import Synchronization

/// A playing device as the host of head-tracking sessions (routing rule 13), for the players built on this project:
/// its side of AudioAccessoryKit's `AccessorySensorUpdates`, over MQTT.
///
/// It retains the device's `SourceState` — what it plays and the person's Head Tracking setting
/// (``report(_:headTracking:)``) — and takes the bridge's news of the sessions it hosts
/// (`R/sources/{itself}/headtracking`, ``sessionNews()``) and the frames hubs send it
/// (`R/sources/{itself}/frames/{hub}/{accessory}`, ``sensorUpdates(for:)``). Only the frames of an accessory's
/// current session, from the hub the accessory belongs to, are handed on; the rest are dropped and counted
/// (``statistics(of:)``).
///
/// ```swift
/// let host = try HeadTrackingHost(address: BluetoothAddress("12:34:56:78:9A:BC")!, mqtt: mqtt, logger: logger)
/// try await host.start()
/// try host.report(.media, headTracking: true)
/// for await frame in host.sensorUpdates(for: AccessoryID("headphones")!) {
///     renderer.apply(pose: frame.data)          // ends when that session is invalidated
/// }
/// ```
public final class HeadTrackingHost: Sendable {
    /// How the host connects.
    public struct Options: Sendable {
        /// The contract's root (a cluster's root: playing devices' topics are never under a slot's).
        public var topicRoot: TopicRoot = .default
        /// The format of the SourceState it publishes, and so of the commands and session news the bridge sends it
        /// (docs/wire-contract.md, "Payloads"; it reads both).
        public var payloadFormat: PayloadFormat = .protobuf
        /// How many frames a ``SensorUpdates`` keeps for a consumer that falls behind: the newest (a late frame is
        /// worthless). Those it drops count as ``Statistics/overflowed``.
        public var bufferedFrames = 8

        public init() {}
    }

    /// One frame of an accessory's IMU, as its hub sent it (AudioAccessoryKit's sensor `Data`, with what the wire
    /// adds).
    public struct SensorFrame: Hashable, Sendable {
        public var accessory: AccessoryID
        public var hub: HubID
        public var session: HeadTrackingSessionID
        /// Per session, from 1: a gap is a frame lost on the way (QoS 0) or expired.
        public var sequence: UInt64
        /// The frame, 1–70 bytes.
        public var data: Data
        /// When the hub sent it, in microseconds since 1970 by the hub's clock.
        public var sentAtUnixMicroseconds: Int64
        /// From the hub's sending to its arrival here, by the two clocks (as exact as they agree).
        public var latency: Duration
    }

    /// A piece of news of a session this device hosts, as the bridge sent it, once taken (older news is dropped).
    public struct SessionNews: Hashable, Sendable {
        public var event: HeadTrackingEvent
        /// The hub the accessory belongs to: the session's frames come from it only.
        public var hub: HubID?
    }

    /// What became of the frames of an accessory (or of every accessory).
    public struct Statistics: Hashable, Sendable {
        /// Frames of the current session handed to a ``SensorUpdates`` (or to none: no one was listening).
        public var received = 0
        /// Frames dropped: of a session other than the current one, from another hub than the session's, or while
        /// the accessory had no session.
        public var otherSession = 0
        public var otherHub = 0
        public var noSession = 0
        /// Payloads that are no frame.
        public var malformed = 0
        /// Frames a ``SensorUpdates`` dropped because its consumer fell behind (its oldest buffered).
        public var overflowed = 0
        /// Frames never received, by the gaps in each session's sequence.
        public var missed = 0
        /// News older than the last taken for the accessory, dropped.
        public var staleNews = 0

        public init() {}

        /// Every frame dropped because it was not the current session's (other session, other hub, no session).
        public var dropped: Int { otherSession + otherHub + noSession }

        static func + (lhs: Self, rhs: Self) -> Self {
            var sum = lhs
            sum.received += rhs.received
            sum.otherSession += rhs.otherSession
            sum.otherHub += rhs.otherHub
            sum.noSession += rhs.noSession
            sum.malformed += rhs.malformed
            sum.overflowed += rhs.overflowed
            sum.missed += rhs.missed
            sum.staleNews += rhs.staleNews
            return sum
        }
    }

    /// The device's Bluetooth address: its topics' name.
    public let address: BluetoothAddress
    private let options: Options
    private let client: MQTTClient
    private let codec = WireCodec()
    private let logger: Logger
    private let state: Mutex<State>
    private let newsTopic: String

    struct State {
        var follower: HeadTrackingFollower
        var subscribers: [AccessoryID: [Subscriber]] = [:]
        var watchers: [UInt64: AsyncStream<SessionNews>.Continuation] = [:]
        var statistics: [AccessoryID: Statistics] = [:]
        /// The last frame's sequence in each accessory's current session.
        var lastFrame: [AccessoryID: UInt64] = [:]
        var nextToken: UInt64 = 0
        var report = SourceReport(activity: nil)
        var stopped = false
    }

    /// A ``SensorUpdates`` waiting for frames: of `session` once bound, of the next session activated until then.
    struct Subscriber {
        let token: UInt64
        var session: HeadTrackingSessionID?
        let continuation: AsyncStream<SensorFrame>.Continuation
    }

    /// Creates the device's connection; call ``start(timeout:)`` to connect.
    public init(
        address: BluetoothAddress, mqtt: MQTTConfiguration, options: Options = Options(), logger: Logger
    ) throws(MQTTError) {
        self.address = address
        self.options = options
        self.logger = logger
        state = Mutex(State(follower: HeadTrackingFollower(host: address)))
        newsTopic = Topic.hostHeadTracking(host: address).name(under: options.topicRoot)
        client = try MQTTClient(configuration: mqtt, logger: logger)
    }

    deinit {
        client.syncClose()
    }

    /// Subscribes to its news (QoS 1) and frames (QoS 0: a frame is not worth a retransmission), connects, and waits
    /// until the broker accepted the connection. `timeout`: see ``AccessoryHub/start(timeout:)``.
    public func start(timeout: Duration? = nil) async throws(MQTTError) {
        try client.subscribe(newsTopic, qos: .atLeastOnce)
        try client.subscribe(Topic.Kind.frames.filter(under: options.topicRoot, source: address), qos: .atMostOnce)
        try client.start(onEvent: { _ in }, onMessage: { [weak self] in self?.receive($0) })
        try await client.waitUntilConnected(timeout: timeout)
    }

    /// Disconnects: every ``SensorUpdates`` and ``sessionNews()`` sequence ends.
    public func stop() async {
        let (continuations, watchers) = state.withLock { state in
            state.stopped = true
            let continuations = state.subscribers.values.flatMap { $0.map(\.continuation) }
            let watchers = Array(state.watchers.values)
            state.subscribers.removeAll()
            state.watchers.removeAll()
            return (continuations, watchers)
        }
        for continuation in continuations { continuation.finish() }
        for watcher in watchers { watcher.finish() }
        await client.close()
    }

    // MARK: - The device's state

    /// Retains the device's SourceState: what it is doing and the person's Head Tracking setting (off by default,
    /// as a device that does not say). The bridge tells the hubs of the sessions it hosts of a change.
    public func report(_ activity: Activity, headTracking: Bool) throws(MQTTError) {
        let report = state.withLock { state in
            let now = UInt64(max(0, WallClock.system.now.unixMilliseconds))
            state.report = SourceReport(
                sequence: max(state.report.sequence + 1, now), activity: activity, headTracking: headTracking)
            return state.report
        }
        try client.publish(
            MQTTMessage(
                topic: Topic.sourceState(source: address).name(under: options.topicRoot),
                payload: codec.encode(report, as: options.payloadFormat), qos: .atLeastOnce, retain: true,
                properties: MQTTProperties(contentType: options.payloadFormat.contentType)))
    }

    /// Turns the person's Head Tracking setting on or off, with the activity last reported (idle if none).
    public func setHeadTracking(_ on: Bool) throws(MQTTError) {
        try report(state.withLock { $0.report.activity } ?? .idle, headTracking: on)
    }

    // MARK: - Sessions and frames

    /// The session of `accessory` this device hosts now, if any.
    public func session(of accessory: AccessoryID) -> HeadTrackingSession? {
        state.withLock { $0.follower.session(of: accessory)?.session }
    }

    /// The news of the sessions this device hosts, from now on, as it is taken (older news is dropped); ends when
    /// the host stops. Keeps up to 256 for a consumer that falls behind.
    public func sessionNews() -> AsyncStream<SessionNews> {
        let (stream, continuation) = AsyncStream.makeStream(of: SessionNews.self, bufferingPolicy: .bufferingNewest(256))
        let token = newToken()
        continuation.onTermination = { [weak self] _ in
            _ = self?.state.withLock { $0.watchers.removeValue(forKey: token) }
        }
        let stopped = state.withLock { state in
            if !state.stopped { state.watchers[token] = continuation }
            return state.stopped
        }
        if stopped { continuation.finish() }
        return stream
    }

    /// The frames of `accessory`'s current session (AudioAccessoryKit's `AccessorySensorUpdates(for:)`): of the
    /// session in force now, or of the next one activated if none is. The sequence ends when that session is
    /// invalidated (or the host stops): ask again for the next session's. It keeps the newest
    /// ``Options/bufferedFrames`` frames for a consumer that falls behind.
    public func sensorUpdates(for accessory: AccessoryID) -> SensorUpdates {
        let (stream, continuation) = AsyncStream.makeStream(
            of: SensorFrame.self, bufferingPolicy: .bufferingNewest(max(1, options.bufferedFrames)))
        let token = newToken()
        continuation.onTermination = { [weak self] _ in
            self?.state.withLock { state in
                state.subscribers[accessory]?.removeAll { $0.token == token }
                if state.subscribers[accessory]?.isEmpty == true { state.subscribers[accessory] = nil }
            }
        }
        let stopped = state.withLock { state in
            guard !state.stopped else { return true }
            let session = state.follower.session(of: accessory)?.session.id
            state.subscribers[accessory, default: []].append(
                Subscriber(token: token, session: session, continuation: continuation))
            return false
        }
        if stopped { continuation.finish() }
        return SensorUpdates(stream: stream)
    }

    private func newToken() -> UInt64 {
        state.withLock { state in
            state.nextToken += 1
            return state.nextToken
        }
    }

    /// What became of the frames and news of `accessory`.
    public func statistics(of accessory: AccessoryID) -> Statistics {
        state.withLock { $0.statistics[accessory] ?? Statistics() }
    }

    /// What became of the frames and news of every accessory.
    public var statistics: Statistics {
        state.withLock { $0.statistics.values.reduce(Statistics(), +) }
    }

    // MARK: - Receiving (on the network thread, which never waits)

    private func receive(_ message: MQTTMessage) {
        if message.topic == newsTopic {
            receiveNews(message)
        } else if case .frames(let host, let hub, let accessory)? = try? Topic(
            parsing: message.topic, under: options.topicRoot), host == address
        {
            receiveFrame(message.payload, from: hub, for: accessory)
        }
    }

    private func receiveNews(_ message: MQTTMessage) {
        let event: HeadTrackingEvent
        let hub: HubID?
        do {
            let format = try PayloadFormat.detect(contentType: message.properties.contentType, payload: message.payload)
            (event, hub) = try codec.decode(HeadTrackingEvent.self, from: message.payload, format: format)
        } catch {
            logger.warning("unreadable head-tracking news from the bridge", metadata: ["error": "\(error)"])
            return
        }
        let accessory = event.session.accessory
        var finished: [AsyncStream<SensorFrame>.Continuation] = []
        state.withLock { state in
            switch state.follower.receive(event, hub: hub) {
            case .otherHost:
                return
            case .stale:
                state.statistics[accessory, default: Statistics()].staleNews += 1
                return
            case .applied(let actions):
                for action in actions {
                    switch action {
                    case .activate(let session, _):
                        state.lastFrame[accessory] = 0
                        for index in state.subscribers[accessory, default: []].indices
                        where state.subscribers[accessory]![index].session == nil {
                            state.subscribers[accessory]![index].session = session.id
                        }
                    case .changeState:
                        break
                    case .invalidate(let session, _):
                        state.lastFrame[accessory] = nil
                        let ending = state.subscribers[accessory, default: []].filter { $0.session == session.id }
                        finished += ending.map(\.continuation)
                        state.subscribers[accessory]?.removeAll { $0.session == session.id }
                    }
                }
                let news = SessionNews(event: event, hub: hub)
                for watcher in state.watchers.values { watcher.yield(news) }
            }
        }
        // Outside the lock: finishing runs the sequence's termination handler, which takes the lock.
        for continuation in finished { continuation.finish() }
    }

    private func receiveFrame(_ payload: [UInt8], from hub: HubID, for accessory: AccessoryID) {
        let receivedAt = WallClock.unixMicroseconds()
        guard let frame = HeadTrackingFrame(decoding: payload) else {
            state.withLock { $0.statistics[accessory, default: Statistics()].malformed += 1 }
            return
        }
        state.withLock { state in
            var statistics = state.statistics[accessory] ?? Statistics()
            defer { state.statistics[accessory] = statistics }
            switch state.follower.frame(of: frame.session, from: hub, for: accessory) {
            case .noSession:
                statistics.noSession += 1
                return
            case .otherSession:
                statistics.otherSession += 1
                return
            case .otherHub:
                statistics.otherHub += 1
                return
            case .current:
                break
            }
            statistics.received += 1
            let last = state.lastFrame[accessory] ?? 0
            if frame.sequence > last {
                statistics.missed += Int(clamping: frame.sequence - last - 1)
                state.lastFrame[accessory] = frame.sequence
            }
            guard let subscribers = state.subscribers[accessory] else { return }
            let sensorFrame = SensorFrame(
                accessory: accessory, hub: hub, session: frame.session, sequence: frame.sequence,
                data: Data(frame.data), sentAtUnixMicroseconds: frame.sentAtUnixMicroseconds,
                latency: .microseconds(receivedAt - frame.sentAtUnixMicroseconds))
            for subscriber in subscribers where subscriber.session == frame.session {
                if case .dropped = subscriber.continuation.yield(sensorFrame) { statistics.overflowed += 1 }
            }
        }
    }
}

extension HeadTrackingHost {
    /// The frames of one session of an accessory (``HeadTrackingHost/sensorUpdates(for:)``), as AudioAccessoryKit's
    /// `AccessorySensorUpdates`: iterate it once; it ends when the session is invalidated or the host stops. Cancel
    /// the iterating task to stop listening.
    public struct SensorUpdates: AsyncSequence, Sendable {
        public typealias Element = SensorFrame
        public typealias Failure = Never

        let stream: AsyncStream<SensorFrame>

        public func makeAsyncIterator() -> AsyncIterator {
            AsyncIterator(base: stream.makeAsyncIterator())
        }

        public struct AsyncIterator: AsyncIteratorProtocol {
            var base: AsyncStream<SensorFrame>.Iterator

            public mutating func next() async -> SensorFrame? {
                await base.next()
            }
        }
    }
}
