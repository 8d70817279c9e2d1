/// What a playing device (a source) is doing.
public enum Activity: Hashable, Sendable, CaseIterable, CustomStringConvertible {
    case idle
    case media
    case call

    /// Media and calls are active; an idle source is not.
    public var isActive: Bool { self != .idle }

    /// Calls come before media, media before idle.
    var priority: Int {
        switch self {
        case .idle: 0
        case .media: 1
        case .call: 2
        }
    }

    public var description: String {
        switch self {
        case .idle: "idle"
        case .media: "media"
        case .call: "call"
        }
    }
}
