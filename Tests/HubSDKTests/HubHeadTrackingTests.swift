import AccessoryModel
@testable import AccessoryWire
import CAudioHub
import Foundation
import Testing
import TestSupport

/// The C SDK's head tracking (iOS 27's AudioAccessoryHeadTracking) against a real mosquitto and the real bridge, whose
/// rule 13 decides the sessions: the handler's calls as the accessory is worn and routed to a playing device that says
/// its Head Tracking setting is on, as that setting changes and as the accessory is taken off; the send errors before
/// and during a session; the frames as the host receives them; news the hub must drop. Serialized: each test runs a
/// broker and a bridge.
@Suite(.serialized) struct HubHeadTrackingTests {
    static let host = [UInt8]([0x1E, 0xA4, 0x00, 0x00, 0x00, 0x02])
    static let hostTopic = "audio/sources/1ea400000002"

    /// The playing device's retained SourceState, in JSON as `mosquitto_pub` sends it: media, and its setting.
    static func report(_ broker: MosquittoBroker, sequence: Int, headTracking: Bool) async throws {
        let setting = headTracking ? "HEAD_TRACKING_ON" : "HEAD_TRACKING_OFF"
        try await broker.publish(
            topic: "\(hostTopic)/state",
            message: "{\"sequence\": \"\(sequence)\", \"activity\": \"ACTIVITY_MEDIA\", \"headTracking\": \"\(setting)\"}",
            qos: 1, retain: true)
    }

    static func bytes(hex: Substring) -> [UInt8] {
        var bytes: [UInt8] = []
        var index = hex.startIndex
        while index < hex.endIndex, let next = hex.index(index, offsetBy: 2, limitedBy: hex.endIndex) {
            bytes.append(UInt8(hex[index..<next], radix: 16) ?? 0)
            index = next
        }
        return bytes
    }

    @Test func sessionsReachTheHandlerAndGateTheFrames() async throws {
        let fixture = try await BridgeFixture()
        let hub = try TestHub("sdk-ht", broker: fixture.broker)
        try hub.recordHeadTracking()
        let id = "tracked"
        let frame = [UInt8](repeating: 7, count: 13)
        let tooLong = [UInt8](repeating: 0, count: 71)

        // No session yet: refused before anything is published, each with its text.
        #expect(hub.send(id, frame) == AUDIOHUB_ERR_NOT_ACTIVATED)
        #expect(hub.send(id, []) == AUDIOHUB_ERR_INVALID_DATA_SIZE)
        #expect(hub.send(id, tooLong) == AUDIOHUB_ERR_INVALID_DATA_SIZE)
        #expect(String(cString: audiohub_strerror(AUDIOHUB_ERR_NOT_ACTIVATED)).contains("notActivated"))
        #expect(String(cString: audiohub_strerror(AUDIOHUB_ERR_INVALID_DATA_SIZE)).contains("invalidDataSize"))
        #expect(hub.session(id) == nil)

        // Registered with head tracking and Apple's spatial extension, its source the device; not worn yet.
        try await Self.report(fixture.broker, sequence: 1, headTracking: true)
        #expect(try await hub.perform { audiohub_pair($0, id, "Tracker", "T-2", AUDIOHUB_CAP_ALL, $1, $2) }.succeeded)
        var apple = audiohub_spatial_extension(
            component_type: 0xaaf, component_sub_type: 0xc0f, component_manufacturer: 0xb05e, component_flags: 0,
            component_flags_mask: 0)
        let size = MemoryLayout<audiohub_spatial_extension>.size
        let registered = try await hub.perform { audiohub_register_spatial($0, id, AUDIOHUB_CAP_ALL, &apple, size, $1, $2) }
        #expect(registered.succeeded && registered.state?.spatialExtension == [0xaaf, 0xc0f, 0xb05e, 0, 0])
        #expect(hub.accessory(id)?.has_spatial_extension == true)
        var source = address(Self.host)
        #expect(try await hub.perform { audiohub_sources($0, id, &source, nil, $1, $2) }.succeeded)
        #expect(hub.send(id, frame) == AUDIOHUB_ERR_NOT_ACTIVATED, "registered, routed to nothing: no session")

        // Worn: routed to the device, whose setting is on: activate.
        let frames = try await fixture.broker.startSubscriber(
            topic: "\(Self.hostTopic)/frames/sdk-ht/\(id)", count: 20, timeout: .seconds(30),
            arguments: ["-F", "%q %r %E %x"])
        #expect(try await hub.perform { audiohub_placement($0, id, AUDIOHUB_PLACEMENT_ON_HEAD, $1, $2) }.succeeded)
        let first = try await hub.headTrackingCalls(count: 1)
        guard case .activate(let session) = first[0] else {
            Issue.record("the first call is \(first[0]), not activate")
            return
        }
        #expect(session.accessoryID == id && session.host == Self.host && session.isHeadTrackingActive)
        #expect(session.sessionID.count == 16 && !session.restorationID.isEmpty && session.framesSent == 0)
        #expect(hub.session(id)?.sessionID == session.sessionID)

        // Sizes are refused in a session too; 20 frames reach the host: QoS 0, not retained, expiring, numbered.
        #expect(hub.send(id, []) == AUDIOHUB_ERR_INVALID_DATA_SIZE)
        #expect(hub.send(id, tooLong) == AUDIOHUB_ERR_INVALID_DATA_SIZE)
        for index in 0..<20 {
            #expect(hub.send(id, [UInt8(index)] + [UInt8](repeating: 0, count: 12)) == AUDIOHUB_ERR_SUCCESS)
        }
        let received = try await frames.output()
        #expect(received.count == 20)
        let now = Int64(Date().timeIntervalSince1970 * 1_000_000)
        for (index, line) in received.enumerated() {
            let fields = line.split(separator: " ")
            #expect(fields.count == 4 && fields[0] == "0" && fields[1] == "0" && ["0", "1"].contains(fields[2]), "\(line)")
            let decoded = HeadTrackingFrame(decoding: Self.bytes(hex: fields.last ?? ""))
            #expect(decoded?.session.bytes == session.sessionID && decoded?.sequence == UInt64(index + 1))
            #expect(decoded?.data.count == 13 && decoded?.data.first == UInt8(index))
            #expect(abs(now - (decoded?.sentAtUnixMicroseconds ?? 0)) < 60_000_000, "stamped with the wall clock")
        }
        #expect(hub.session(id)?.framesSent == 20 && hub.stats.frames_sent == 20)

        // News the hub cannot read is dropped, and changes nothing.
        try await fixture.broker.publish(
            topic: "audio/hubs/sdk-ht/accessories/\(id)/headtracking", payload: [0xFF, 0xFF, 0xFF])
        try await waitUntil("the malformed news counted") { hub.stats.head_tracking_malformed == 1 }
        #expect(hub.session(id)?.sessionID == session.sessionID)

        // The person turns head tracking off on the host, then on.
        try await Self.report(fixture.broker, sequence: 2, headTracking: false)
        let off = try await hub.headTrackingCalls(count: 2)
        #expect(off[1] == .stateDidChange(off[1].session, isActive: false) && off[1].session.sessionID == session.sessionID)
        #expect(hub.send(id, frame) == AUDIOHUB_ERR_NOT_ACTIVATED, "head tracking off at the host")
        #expect(hub.session(id)?.isHeadTrackingActive == false)
        try await Self.report(fixture.broker, sequence: 3, headTracking: true)
        let on = try await hub.headTrackingCalls(count: 3)
        #expect(on[2] == .stateDidChange(on[2].session, isActive: true))
        #expect(hub.send(id, [UInt8](repeating: 1, count: 70)) == AUDIOHUB_ERR_SUCCESS)

        // Taken off: invalidated, and nothing more may be sent.
        #expect(try await hub.perform { audiohub_placement($0, id, AUDIOHUB_PLACEMENT_OFF_HEAD, $1, $2) }.succeeded)
        let ended = try await hub.headTrackingCalls(count: 4)
        #expect(ended[3] == .invalidate(ended[3].session, reason: AUDIOHUB_HEAD_TRACKING_REASON_TAKEN_OFF.rawValue))
        #expect(ended[3].session.sessionID == session.sessionID && ended[3].session.framesSent == 21)
        #expect(hub.session(id) == nil)
        #expect(hub.send(id, frame) == AUDIOHUB_ERR_NOT_ACTIVATED)
        #expect(hub.stats.head_tracking_news == 4 && hub.stats.head_tracking_stale == 0)
    }
}

extension HeadTrackingCall {
    /// The session the call is about.
    var session: SessionCopy {
        switch self {
        case .activate(let session), .stateDidChange(let session, _), .invalidate(let session, _): session
        }
    }
}
