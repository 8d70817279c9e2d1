@testable import AccessoryControl
import AccessoryModel
import AccessoryWire
import Foundation
import Logging
import MQTTClient
import Synchronization
import Testing

/// A hub's head-tracking features without a broker: the bridge's news goes straight in, the frames a session sends
/// are recorded. The errors of `sendDataToAudioExtension(_:)` come before anything is sent; each handler hears of its
/// session in order; news not newer than the last is dropped.
@Suite(.timeLimit(.minutes(1))) struct HeadTrackingFeatureTests {
    typealias Session = AudioAccessoryHeadTracking.Session

    static let hubID = HubID("hub-1")!
    static let headphones = AccessoryID("headphones")!
    static let phone = BluetoothAddress("12:34:56:78:9A:BC")!
    static let laptop = BluetoothAddress("AB:CD:EF:01:23:45")!
    static let s1 = HeadTrackingSessionID(high: 0x0102_0304_0506_0708, low: 0x090a_0b0c_0d0e_0f10)
    static let s2 = HeadTrackingSessionID(high: 2, low: 2)

    /// A hub that never connects (it only lends its accessories their identity), features whose frames are
    /// recorded, and the handlers' calls.
    final class Fixture: Sendable {
        let hub: AccessoryHub
        let features: HeadTrackingFeatures
        let outbox = Outbox()
        let calls: AsyncStream<Call>
        let log: AsyncStream<Call>.Continuation

        init() throws {
            var logger = Logger(label: "features")
            logger.logLevel = .critical
            hub = try AccessoryHub(hubID: hubID, mqtt: MQTTConfiguration(clientID: "unit"), logger: logger)
            let outbox = outbox
            features = HeadTrackingFeatures(
                hub: hubID, sourcesRoot: .default,
                publish: { message throws(MQTTError) in outbox.messages.withLock { $0.append(message) } })
            (calls, log) = AsyncStream.makeStream(of: Call.self)
        }

        /// Attaches a feature to the headphones whose handlers record their calls.
        func attach() -> UInt64 {
            let log = log
            return features.attach(hub.accessory(headphones)) { Recorder(log: log) }
        }

        var sent: [MQTTMessage] { outbox.messages.withLock { $0 } }

        var frames: [HeadTrackingFrame] {
            sent.compactMap { HeadTrackingFrame(decoding: $0.payload) }
        }
    }

    /// What the features published.
    final class Outbox: Sendable {
        let messages = Mutex<[MQTTMessage]>([])
    }

    enum Call: Hashable, Sendable {
        case activate(UUID, active: Bool)
        case stateChanged(Bool)
        case invalidate
    }

    struct Recorder: AudioAccessoryHeadTracking.Handler {
        let log: AsyncStream<Call>.Continuation

        func activate(for session: Session) {
            log.yield(.activate(session.sessionID, active: session.isHeadTrackingActive))
        }

        func headTrackingStateDidChange(isActive: Bool) {
            log.yield(.stateChanged(isActive))
        }

        func invalidate() {
            log.yield(.invalidate)
        }
    }

    static func news(
        _ kind: HeadTrackingEvent.Kind, _ id: HeadTrackingSessionID, on host: BluetoothAddress = phone,
        active: Bool = true, _ sequence: UInt64, epoch: UInt64 = 0, _ reason: HeadTrackingEvent.Reason = .routed
    ) -> HeadTrackingEvent {
        HeadTrackingEvent(
            kind,
            HeadTrackingSession(
                accessory: headphones, id: id, host: host, isHeadTrackingActive: active,
                order: CommandOrder(epoch: epoch, sequence: sequence)),
            reason: reason, at: Timestamp(unixMilliseconds: 1_763_790_000_000))
    }

    @Test func framesAreOneToSeventyBytesAndNothingIsSentOtherwise() async throws {
        let fixture = try Fixture()
        let token = fixture.attach()
        fixture.features.receive(Self.news(.activated, Self.s1, 1))
        var calls = fixture.calls.makeAsyncIterator()
        #expect(await calls.next() == .activate(Self.s1.uuid, active: true))
        let session = try #require(fixture.features.session(of: Self.headphones, token: token))

        for size in [0, 71, 1_000] {
            #expect(throws: AudioAccessoryError.invalidDataSize) { try session.sendDataToAudioExtension(Data(count: size)) }
        }
        #expect(fixture.sent.isEmpty)

        try session.sendDataToAudioExtension(Data([1]))
        try session.sendDataToAudioExtension(Data(repeating: 7, count: 70))
        try session.sendDataToAudioExtension(Data(repeating: 9, count: 13))
        let messages = fixture.sent
        #expect(messages.map(\.topic) == Array(repeating: "audio/sources/123456789abc/frames/hub-1/headphones", count: 3))
        #expect(messages.allSatisfy { $0.qos == .atMostOnce && !$0.retain && $0.properties.messageExpiry == .seconds(1) })
        #expect(fixture.frames.map(\.sequence) == [1, 2, 3])
        #expect(fixture.frames.map(\.data.count) == [1, 70, 13])
        #expect(fixture.frames.allSatisfy { $0.session == Self.s1 })
        #expect(session.sessionID == Self.s1.uuid && session.host == Self.phone)
        #expect(session.restorationID == "aab:headphones")
    }

    /// Not active: head tracking off on the host (from the start, or turned off), or the session ended.
    @Test func notActivatedWhileHeadTrackingIsOffOrAfterTheSessionEnded() async throws {
        let fixture = try Fixture()
        let token = fixture.attach()
        var calls = fixture.calls.makeAsyncIterator()
        fixture.features.receive(Self.news(.activated, Self.s1, active: false, 1))
        #expect(await calls.next() == .activate(Self.s1.uuid, active: false))
        let session = try #require(fixture.features.session(of: Self.headphones, token: token))
        #expect(!session.isHeadTrackingActive)
        #expect(throws: AudioAccessoryError.notActivated) { try session.sendDataToAudioExtension(Data([1])) }
        // A size error is told first: the frame could never be sent.
        #expect(throws: AudioAccessoryError.invalidDataSize) { try session.sendDataToAudioExtension(Data()) }

        fixture.features.receive(Self.news(.stateChanged, Self.s1, active: true, 2, .switchChanged))
        #expect(await calls.next() == .stateChanged(true))
        try session.sendDataToAudioExtension(Data([1]))

        fixture.features.receive(Self.news(.stateChanged, Self.s1, active: false, 3, .switchChanged))
        #expect(await calls.next() == .stateChanged(false))
        #expect(throws: AudioAccessoryError.notActivated) { try session.sendDataToAudioExtension(Data([2])) }

        fixture.features.receive(Self.news(.stateChanged, Self.s1, active: true, 4, .switchChanged))
        fixture.features.receive(Self.news(.invalidated, Self.s1, 5, .takenOff))
        #expect(await calls.next() == .stateChanged(true))
        #expect(await calls.next() == .invalidate)
        #expect(!session.isActive)
        #expect(throws: AudioAccessoryError.notActivated) { try session.sendDataToAudioExtension(Data([3])) }
        #expect(fixture.features.session(of: Self.headphones, token: token) == nil)
        #expect(fixture.frames.count == 1)
    }

    /// A repeat, or an older owner's news, is dropped: the next call a handler hears is the newer news's.
    @Test func newsNotNewerThanTheLastIsDropped() async throws {
        let fixture = try Fixture()
        _ = fixture.attach()
        var calls = fixture.calls.makeAsyncIterator()
        fixture.features.receive(Self.news(.activated, Self.s1, 10, epoch: 3))
        #expect(await calls.next() == .activate(Self.s1.uuid, active: true))
        #expect(fixture.features.receive(Self.news(.activated, Self.s1, 10, epoch: 3)) == .stale(last: CommandOrder(epoch: 3, sequence: 10)))
        #expect(fixture.features.receive(Self.news(.invalidated, Self.s1, 50, epoch: 2, .takenOff)).isStale)
        #expect(fixture.features.receive(Self.news(.activated, Self.s2, on: Self.laptop, 99, epoch: 2)).isStale)
        // The new owner's change of state: the first call after the activation.
        fixture.features.receive(Self.news(.stateChanged, Self.s1, active: false, 1, epoch: 4, .switchChanged))
        #expect(await calls.next() == .stateChanged(false))
    }

    /// A feature attached while a session is in force activates it at once; a second feature for the accessory
    /// replaces the first, whose session ends; invalidating a feature, or stopping, ends its session.
    @Test func attachingReplacingAndDetaching() async throws {
        let fixture = try Fixture()
        var calls = fixture.calls.makeAsyncIterator()
        fixture.features.receive(Self.news(.activated, Self.s1, 1))
        let first = fixture.attach()
        #expect(await calls.next() == .activate(Self.s1.uuid, active: true))
        let firstSession = try #require(fixture.features.session(of: Self.headphones, token: first))

        let second = fixture.attach()
        #expect(await calls.next() == .invalidate)
        #expect(await calls.next() == .activate(Self.s1.uuid, active: true))
        #expect(!firstSession.isActive && fixture.features.session(of: Self.headphones, token: first) == nil)
        #expect(throws: AudioAccessoryError.notActivated) { try firstSession.sendDataToAudioExtension(Data([1])) }

        fixture.features.detach(Self.headphones, token: first)  // no longer attached: nothing happens
        fixture.features.detach(Self.headphones, token: second)
        #expect(await calls.next() == .invalidate)
        // News goes on being taken; no handler hears of it.
        fixture.features.receive(Self.news(.invalidated, Self.s1, 2, .takenOff))
        fixture.features.receive(Self.news(.activated, Self.s2, 3))
        let third = fixture.attach()
        #expect(await calls.next() == .activate(Self.s2.uuid, active: true))
        fixture.features.stop()
        #expect(await calls.next() == .invalidate)
        #expect(fixture.features.session(of: Self.headphones, token: third) == nil)
    }

    /// A hub that follows the bridge's layout and moves to another slot ends its sessions (the old root's bridge
    /// cannot), keeps its features, and forgets the old owner's orders: the new owner's epochs are another slot's,
    /// and its first session is taken however low its order.
    @Test func aMoveEndsTheSessionsAndForgetsTheOldOwnersOrders() async throws {
        let fixture = try Fixture()
        let token = fixture.attach()
        var calls = fixture.calls.makeAsyncIterator()
        fixture.features.receive(Self.news(.activated, Self.s1, 10, epoch: 7))
        #expect(await calls.next() == .activate(Self.s1.uuid, active: true))
        let session = try #require(fixture.features.session(of: Self.headphones, token: token))

        #expect(fixture.features.moved() == 1)
        #expect(await calls.next() == .invalidate)
        #expect(!session.isActive && fixture.features.session(of: Self.headphones, token: token) == nil)
        #expect(fixture.features.moved() == 0, "nothing left to end")

        #expect(!fixture.features.receive(Self.news(.activated, Self.s2, on: Self.laptop, 1, epoch: 1)).isStale)
        #expect(await calls.next() == .activate(Self.s2.uuid, active: true))
        #expect(fixture.features.session(of: Self.headphones, token: token)?.host == Self.laptop)
    }

    /// In a cluster a hub's topics are under its slot's root, a playing device's under the cluster's: so are the
    /// frames, whatever the hub's slot.
    @Test func inAClusterFramesGoUnderTheClustersRoot() throws {
        var options = AccessoryHub.Options()
        options.slots = ClusterSlots(12)
        var logger = Logger(label: "cluster-hub")
        logger.logLevel = .critical
        let hub = try AccessoryHub(hubID: Self.hubID, mqtt: MQTTConfiguration(clientID: "unit"), options: options, logger: logger)
        #expect(options.root(of: Self.hubID).rawValue.hasPrefix("audio/slots/"))
        let feature = AudioAccessoryHeadTracking(for: hub.accessory(Self.headphones)) { Recorder(log: AsyncStream.makeStream(of: Call.self).continuation) }
        hub.headTracking.receive(Self.news(.activated, Self.s1, 1))
        let session = try #require(feature.session)
        #expect(session.topic == "audio/sources/123456789abc/frames/hub-1/headphones")
        feature.invalidate()
        #expect(feature.session == nil && !session.isActive)
    }

    @Test func aSessionIDIsAUUIDOfTheSameBytes() {
        #expect(Self.s1.uuid.uuidString == "01020304-0506-0708-090A-0B0C0D0E0F10")
    }
}

extension HeadTrackingFollower.Outcome {
    var isStale: Bool {
        if case .stale = self { true } else { false }
    }
}
