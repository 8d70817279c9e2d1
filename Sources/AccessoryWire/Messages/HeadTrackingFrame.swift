import AccessoryModel
import Foundation

/// One frame of IMU data in a head-tracking session, from the hub straight to the host
/// (`{root}/sources/{host}/frames/{hub}/{accessory}`, QoS 0, not retained, expiring after a second): the bridge never
/// sees one.
public struct HeadTrackingFrame: Hashable, Sendable {
    /// AudioAccessoryKit's bounds of a frame: `sendDataToAudioExtension(_:)` throws `invalidDataSize` outside them.
    public static let sizes = 1...70

    public var session: HeadTrackingSessionID
    /// Per session, from 1.
    public var sequence: UInt64
    /// When the hub sent it, in microseconds since 1970 by the hub's clock.
    public var sentAtUnixMicroseconds: Int64
    public var data: [UInt8]

    public init(session: HeadTrackingSessionID, sequence: UInt64, sentAtUnixMicroseconds: Int64, data: [UInt8]) {
        self.session = session
        self.sequence = sequence
        self.sentAtUnixMicroseconds = sentAtUnixMicroseconds
        self.data = data
    }

    /// The frame's protobuf.
    public var encoded: [UInt8] {
        let message = Audioaccessory_V1_HeadTrackingFrame.with {
            $0.sessionID = Data(session.bytes)
            $0.sequence = sequence
            $0.sentAtUnixUs = sentAtUnixMicroseconds
            $0.data = Data(data)
        }
        return (try? message.serializedBytes() as [UInt8]) ?? []
    }

    /// Reads a frame's protobuf; `nil` when it is not one (malformed, a session id not 16 bytes, data out of bounds).
    public init?(decoding payload: [UInt8]) {
        guard let message = try? Audioaccessory_V1_HeadTrackingFrame(serializedBytes: payload),
            let session = HeadTrackingSessionID(bytes: message.sessionID), Self.sizes.contains(message.data.count)
        else { return nil }
        self.init(
            session: session, sequence: message.sequence, sentAtUnixMicroseconds: message.sentAtUnixUs,
            data: Array(message.data))
    }
}
