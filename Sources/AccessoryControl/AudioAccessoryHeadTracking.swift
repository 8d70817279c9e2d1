import AccessoryModel
import AccessoryWire
import Foundation
import MQTTClient
import Synchronization

/// AudioAccessoryKit's `AudioAccessoryHeadTracking` (iOS 27), over MQTT: a paired accessory's head-tracking feature.
/// The bridge decides its sessions (routing rule 13: registered with `.headTracking`, worn, and routed to a playing
/// device, the **host**) and tells its hub; a handler made by `handlerFactory` hears of each session, and sends the
/// accessory's IMU frames straight to the host with ``Session/sendDataToAudioExtension(_:)`` — never through the
/// bridge.
///
/// ```swift
/// struct Tracker: AudioAccessoryHeadTracking.Handler {
///     func activate(for session: AudioAccessoryHeadTracking.Session) { imu.onSample { try? session.sendDataToAudioExtension($0) } }
///     func headTrackingStateDidChange(isActive: Bool) { isActive ? imu.start() : imu.stop() }
///     func invalidate() { imu.stop() }
/// }
/// let headTracking = AudioAccessoryHeadTracking(for: accessory) { Tracker() }
/// ```
///
/// Each session gets a handler of its own, made when the session is established: `activate(for:)`, then any number of
/// `headTrackingStateDidChange(isActive:)`, then `invalidate()`, in that order, on a serial queue of the accessory's
/// (never on the network thread, which never waits for a handler). A feature created while a session is in force
/// activates it at once. The hub keeps the order, (epoch, sequence), of the last news of each accessory and drops
/// older news (an older owner's, in a cluster). Apple's handler also hears of the accessory's transport messages
/// (`handleAccessorySensorMessage(_:)`); over MQTT the hub is the accessory's transport, so it is never called.
///
/// One feature per accessory: a second one for the same accessory replaces the first (whose session, if any, is
/// invalidated before the second one's handler hears of it). ``invalidate()`` ends the feature; ``AccessoryHub/stop()`` ends every feature of the hub.
public final class AudioAccessoryHeadTracking: Sendable {
    /// The accessory whose head tracking this is.
    public let accessory: PairedAccessory
    let token: UInt64

    /// Attaches a head-tracking feature to `accessory` on its hub: `handlerFactory` makes the handler of each of its
    /// sessions.
    public init(for accessory: PairedAccessory, _ handlerFactory: @escaping @Sendable () -> any Handler) {
        self.accessory = accessory
        token = accessory.hub.headTracking.attach(accessory, factory: handlerFactory)
    }

    /// The session in force, if any (the one whose handler was, or is about to be, activated).
    public var session: Session? {
        accessory.hub.headTracking.session(of: accessory.id, token: token)
    }

    /// Ends the feature: the session in force is invalidated (its handler's `invalidate()`), and no handler hears of
    /// another. Idempotent.
    public func invalidate() {
        accessory.hub.headTracking.detach(accessory.id, token: token)
    }
}

extension AudioAccessoryHeadTracking {
    /// What hears of a head-tracking session (AudioAccessoryKit's `AudioAccessoryHeadTracking.Handler`): one per
    /// session, called in order on the accessory's serial queue.
    public protocol Handler: Sendable {
        /// A head-tracking session has been established with the host. Read ``Session/isHeadTrackingActive`` to
        /// know whether to sample the IMU now.
        func activate(for session: Session)

        /// The person turned head tracking on or off on the host (its Settings, its Control Center): start or stop
        /// sampling the IMU. While it is off, ``Session/sendDataToAudioExtension(_:)`` throws `notActivated`.
        func headTrackingStateDidChange(isActive: Bool)

        /// Apple's control messages from the accessory's transport extension. Over MQTT the hub is the accessory's
        /// transport and reads those itself: this is never called (a default implementation does nothing).
        func handleAccessorySensorMessage(_ message: Data)

        /// The session ended (taken off, the route moved to another host, the accessory unregistered, the hub
        /// stopped…): no further calls come, and the session sends nothing more.
        func invalidate()
    }
}

extension AudioAccessoryHeadTracking.Handler {
    /// Never called over MQTT (see ``AudioAccessoryHeadTracking/Handler/handleAccessorySensorMessage(_:)``).
    public func handleAccessorySensorMessage(_ message: Data) {}
}

extension AudioAccessoryHeadTracking {
    /// A head-tracking session (AudioAccessoryKit's `AudioAccessoryHeadTracking.Session`): the accessory, its host,
    /// and the way to the host's Spatial Audio renderer.
    public final class Session: Sendable, CustomStringConvertible {
        /// The accessory whose IMU this session streams.
        public let accessory: PairedAccessory
        /// The session's id: 16 unguessable bytes the bridge made, carried by every frame (as a UUID, as Apple's
        /// `AccessoryFeatureSession.sessionID`).
        public let sessionID: UUID
        /// The playing device whose renderer takes the frames.
        public let host: BluetoothAddress
        /// Stable for the accessory across its sessions; `nil` when the bridge gave none.
        public let restorationID: String?
        /// The session's id as the wire has it.
        let id: HeadTrackingSessionID
        /// Where its frames go: `R/sources/{host}/frames/{hub}/{accessory}`, under the cluster's root.
        let topic: String
        private let publish: @Sendable (MQTTMessage) throws(MQTTError) -> Void
        private let state: Mutex<State>

        struct State {
            var isActive = true
            var isHeadTrackingActive: Bool
            /// The sequence of the last frame sent.
            var sequence: UInt64 = 0
        }

        /// The properties of every frame: a late frame is worthless, so the broker keeps one for a second at most.
        static let frameProperties = MQTTProperties(messageExpiry: .seconds(1))

        /// A session in force: its frames go to `root`'s frames topic of its host, from `hub`, through `publish`.
        init(
            _ session: HeadTrackingSession, accessory: PairedAccessory, hub: HubID, root: TopicRoot,
            publish: @escaping @Sendable (MQTTMessage) throws(MQTTError) -> Void
        ) {
            self.accessory = accessory
            id = session.id
            sessionID = session.id.uuid
            host = session.host
            restorationID = session.restorationID
            topic = Topic.frames(host: session.host, hub: hub, accessory: session.accessory).name(under: root)
            self.publish = publish
            state = Mutex(State(isHeadTrackingActive: session.isHeadTrackingActive))
        }

        /// Whether head tracking is on for this accessory on its host, as the bridge last said: read it when the
        /// session starts; ``Handler/headTrackingStateDidChange(isActive:)`` tells of changes.
        public var isHeadTrackingActive: Bool {
            state.withLock { $0.isHeadTrackingActive }
        }

        /// Whether the session is still in force (not invalidated).
        public var isActive: Bool {
            state.withLock { $0.isActive }
        }

        /// Sends one frame of IMU data to the host's Spatial Audio renderer: over MQTT, QoS 0, not retained, expiring
        /// after a second (a late frame is worthless, and a lost one is not sent again).
        ///
        /// Throws, with nothing sent: ``AudioAccessoryError/invalidDataSize`` when `data` is empty or larger than 70
        /// bytes; ``AudioAccessoryError/notActivated`` when the session ended or head tracking is off on the host.
        /// Throws an ``MQTTError`` when the hub is not connected (a frame never waits for a connection).
        public func sendDataToAudioExtension(_ data: Data) throws {
            guard HeadTrackingFrame.sizes.contains(data.count) else { throw AudioAccessoryError.invalidDataSize }
            let sequence = try state.withLock { state throws(AudioAccessoryError) -> UInt64 in
                guard state.isActive, state.isHeadTrackingActive else { throw .notActivated }
                state.sequence += 1
                return state.sequence
            }
            let frame = HeadTrackingFrame(
                session: id, sequence: sequence, sentAtUnixMicroseconds: WallClock.unixMicroseconds(), data: Array(data))
            try publish(
                MQTTMessage(
                    topic: topic, payload: frame.encoded, qos: .atMostOnce, retain: false,
                    properties: Self.frameProperties))
        }

        /// The person's setting changed; says whether it did.
        func setHeadTrackingActive(_ on: Bool) -> Bool {
            state.withLock { state in
                guard state.isActive, state.isHeadTrackingActive != on else { return false }
                state.isHeadTrackingActive = on
                return true
            }
        }

        /// The session ended: nothing more may be sent.
        func end() {
            state.withLock { $0.isActive = false }
        }

        /// `session 0f3c5e… of headphones (hub hub-1) on 12:34:56:78:9A:BC`.
        public var description: String {
            "session \(id.description.prefix(8))… of \(accessory) on \(host)"
        }
    }
}

extension HeadTrackingSessionID {
    /// The id whose 16 bytes are `uuid`'s.
    public init(uuid: UUID) {
        self.init(bytes: withUnsafeBytes(of: uuid.uuid) { Array($0) })!
    }

    /// The same 16 bytes as a UUID (Apple's `AccessoryFeatureSession.sessionID` is one).
    public var uuid: UUID {
        let b = bytes
        return UUID(uuid: (b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]))
    }
}
