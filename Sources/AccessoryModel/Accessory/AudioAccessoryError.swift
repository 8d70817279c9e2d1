/// AudioAccessoryKit's `AudioAccessoryError` (iOS 27): what a head-tracking session's `sendDataToAudioExtension(_:)`
/// throws, before anything is sent.
public enum AudioAccessoryError: Error, Hashable, Sendable, CaseIterable, CustomStringConvertible {
    /// The frame is empty or larger than 70 bytes.
    case invalidDataSize
    /// The session is not active: it ended, or the person's Head Tracking setting on the host is off.
    case notActivated

    public var description: String {
        switch self {
        case .invalidDataSize: "invalidDataSize: a head-tracking frame is 1 to 70 bytes"
        case .notActivated: "notActivated: the head-tracking session ended, or head tracking is off on its host"
        }
    }
}
