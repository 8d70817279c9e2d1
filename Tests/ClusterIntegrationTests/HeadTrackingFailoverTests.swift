import AccessoryControl
import AccessoryModel
import Foundation
import HeadTrackingFixtures
import Logging
import MQTTClient
import Synchronization
import Testing
import TestSupport

/// Head tracking through a takeover (docs/scale-out.md, "Head-tracking sessions across a takeover"): the member that
/// serves an accessory's slot is killed while its hub streams 100 frames a second to the host. Frames go from the hub
/// to the host through the broker, not through a bridge, so they keep flowing while no member serves the slot; the
/// member that takes the slot over reads the session back from the accessory's retained state and keeps it: the same
/// session id, no second activation, no invalidation, no frame missed. Then it is that member that ends the session
/// when the accessory is taken off.
@Suite(.serialized) struct HeadTrackingFailoverTests {
    static let phone = BluetoothAddress("12:34:56:78:9A:BC")!
    static let headphones = AccessoryID("headphones")!
    static let hubID = HubID("hub-1")!

    static var logger: Logger {
        var logger = Logger(label: "head-tracking-failover")
        logger.logLevel = .warning
        return logger
    }

    /// Sends a 13-byte frame every 10 ms until stopped; counts what it sent and what was refused.
    final class Streamer: Sendable {
        private final class Counts: Sendable {
            let value = Mutex<(sent: Int, refused: Int)>((0, 0))
        }

        private let counts = Counts()
        private let task: Task<Void, Never>

        init(_ session: AudioAccessoryHeadTracking.Session) {
            let counts = counts
            task = Task {
                var tick: UInt8 = 0
                while !Task.isCancelled {
                    tick &+= 1
                    do {
                        try session.sendDataToAudioExtension(Data(repeating: tick, count: 13))
                        counts.value.withLock { $0.sent += 1 }
                    } catch {
                        counts.value.withLock { $0.refused += 1 }
                    }
                    try? await Task.sleep(for: .milliseconds(10))
                }
            }
        }

        var sent: Int { counts.value.withLock { $0.sent } }
        var refused: Int { counts.value.withLock { $0.refused } }

        func stop() async {
            task.cancel()
            await task.value
        }
    }

    @Test func aSessionOutlivesTheMemberThatStartedIt() async throws {
        let etcd = try await EtcdServer()
        let broker = try await MosquittoBroker()
        let members = MemberProcesses(etcd: etcd, broker: broker)
        for name in ["m1", "m2", "m3"] { try members.start(name) }
        try await members.waitUntilServed(by: ["m1", "m2", "m3"])

        var hostMQTT = MQTTConfiguration(clientID: "host-phone")
        hostMQTT.port = broker.port
        let host = try HeadTrackingHost(address: Self.phone, mqtt: hostMQTT, logger: Self.logger)
        try await host.start(timeout: .seconds(20))
        let news = NewsLog(host)
        var hubMQTT = MQTTConfiguration(clientID: "hub-1")
        hubMQTT.port = broker.port
        var options = AccessoryHub.Options()
        let slots = try #require(ClusterSlots(members.slots))
        options.slots = slots
        let hub = try AccessoryHub(hubID: Self.hubID, mqtt: hubMQTT, options: options, logger: Self.logger)
        try await hub.start(timeout: .seconds(20))

        // The phone plays media with head tracking on; the headphones go on: a session on the phone.
        try host.report(.media, headTracking: true)
        let accessory = try await hub.pair(Self.headphones, name: "Studio", model: "S", hardwareCapabilities: .all)
        try await AccessoryControlDevice.register(
            accessory,
            AccessoryControlDevice.Configuration(
                deviceCapabilities: .all,
                spatialExtensionDescription: AudioComponentDescription(
                    componentType: 0xaaf, componentSubType: 0xc0f, componentManufacturer: 0xb05e)))
        try await hub.report(primary: Self.phone, secondary: nil, for: accessory)
        let log = SessionLog()
        let headTracking = AudioAccessoryHeadTracking(for: accessory) { SessionLog.Handler(log: log) }
        let frames = FrameCollector(host.sensorUpdates(for: Self.headphones))
        try await hub.report(placement: .onHead, for: accessory)
        let session = try await log.waitForActivation()
        #expect(session.host == Self.phone && session.isHeadTrackingActive)
        _ = try await news.waitFor(1)

        // Frames flow; then the member serving the hub's slot is killed.
        let streamer = Streamer(session)
        try await frames.waitFor(50)
        let slot = slots.slot(of: Self.hubID)
        let victim = try #require(members.owners()[slot], "slot \(slot) served")
        let killed = try members.kill(victim)
        try await waitUntil("slot \(slot) served again", timeout: .seconds(15)) {
            members.gaps(after: killed, slots: [slot]).count == 1
        }
        let successor = try #require(members.owners()[slot])
        #expect(successor != victim)
        // Two more seconds of frames under the new owner, then the stream stops and every frame sent has arrived.
        try await Task.sleep(for: .seconds(2))
        await streamer.stop()
        try await frames.waitFor(streamer.sent)

        #expect(streamer.refused == 0, "the hub never lost its session: \(streamer.refused) frames refused")
        #expect(log.calls == [.activate(session.sessionID, active: true)], "no second activation, no invalidation")
        #expect(headTracking.session === session)
        #expect(host.session(of: Self.headphones)?.id.uuid == session.sessionID)
        #expect(Set(news.all.map(\.event.session.id.uuid)) == [session.sessionID], "the host heard of one session")
        #expect(!news.all.contains { $0.event.kind == .invalidated })
        let statistics = host.statistics(of: Self.headphones)
        #expect(statistics.received == streamer.sent && statistics.missed == 0 && statistics.dropped == 0, "\(statistics)")
        #expect(frames.all.map(\.sequence) == Array(1...UInt64(streamer.sent)), "every frame, in order, none twice")

        // Taken off: the successor, which took the session over, ends it on both sides.
        try await hub.report(placement: .offHead, for: accessory)
        try await log.waitFor("the session's end") { $0.last == .invalidate(session.sessionID) }
        // Checked after something the bridge did later (the end), not after a pause: nothing came between.
        #expect(log.calls == [.activate(session.sessionID, active: true), .invalidate(session.sessionID)])
        try await waitUntil("the host's updates end") { frames.hasEnded }
        #expect(news.all.last?.event.kind == .invalidated && news.all.last?.event.reason == .takenOff)
        #expect(host.session(of: Self.headphones) == nil)
        let (first, last) = (try #require(news.all.first), try #require(news.all.last))
        #expect(last.event.session.order.epoch > first.event.session.order.epoch, "the end came from the new owner")
        print(
            "head tracking across a takeover: \(victim) killed, slot \(slot) served by \(successor) after "
                + "\(String(format: "%.2f", members.gaps(after: killed, slots: [slot])[slot] ?? 0)) s; "
                + "\(streamer.sent) frames sent, \(statistics.received) received, \(statistics.missed) missed")

        headTracking.invalidate()
        await hub.stop()
        await host.stop()
    }
}
