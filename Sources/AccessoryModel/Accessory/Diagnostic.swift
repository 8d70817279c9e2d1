/// A warning about an accessory that is not an error of any one request: AudioAccessoryKit's "common mistakes",
/// and data that may be out of date.
public enum Diagnostic: Hashable, Sendable, CustomStringConvertible {
    /// Registered with `.placement`, yet no placement was reported within the grace period.
    case placementNotReported(after: Duration)
    /// Registered with `.audioSwitching`, yet no audio source was reported within the grace period.
    case sourcesNotReported(after: Duration)
    /// The accessory's hub is offline: its state may be out of date and it takes no part in routing.
    case hubOffline(HubID)
    /// A diagnostic as a bridge described it, in words this version does not recognise (a newer bridge's).
    case reported(String)

    public var description: String {
        switch self {
        case .placementNotReported(let after):
            "registered with .placement but no placement was reported within \(after.humanReadable) of registering; "
                + "report every placement change, .offHead included"
        case .sourcesNotReported(let after):
            "registered with .audioSwitching but no audio source was reported within \(after.humanReadable) of "
                + "registering; report the Bluetooth addresses of the connected sources"
        case .hubOffline(let hub):
            "hub \(hub) is offline: " + Self.hubOfflineSuffix
        case .reported(let text):
            text
        }
    }

    private static let placementPrefix = "registered with .placement but no placement was reported within "
    private static let placementSuffix = " of registering; report every placement change, .offHead included"
    private static let sourcesPrefix = "registered with .audioSwitching but no audio source was reported within "
    private static let sourcesSuffix = " of registering; report the Bluetooth addresses of the connected sources"
    private static let hubOfflineSuffix = "this state may be out of date and the accessory takes no part in routing"

    /// The diagnostic a ``description`` describes: the inverse of ``description``, and ``reported(_:)`` for words
    /// this version does not recognise.
    public init(description text: String) {
        if let middle = Self.between(Self.placementPrefix, Self.placementSuffix, in: text),
            let duration = Duration(humanReadable: middle)
        {
            self = .placementNotReported(after: duration)
        } else if let middle = Self.between(Self.sourcesPrefix, Self.sourcesSuffix, in: text),
            let duration = Duration(humanReadable: middle)
        {
            self = .sourcesNotReported(after: duration)
        } else if let middle = Self.between("hub ", " is offline: " + Self.hubOfflineSuffix, in: text),
            let hub = HubID(middle)
        {
            self = .hubOffline(hub)
        } else {
            self = .reported(text)
        }
    }

    private static func between(_ prefix: String, _ suffix: String, in text: String) -> String? {
        guard text.hasPrefix(prefix), text.hasSuffix(suffix), text.count > prefix.count + suffix.count else { return nil }
        return String(text.dropFirst(prefix.count).dropLast(suffix.count))
    }
}

extension Duration {
    /// `30 s`, `1500 ms`.
    var humanReadable: String {
        let milliseconds = wholeMilliseconds
        return milliseconds % 1000 == 0 ? "\(milliseconds / 1000) s" : "\(milliseconds) ms"
    }

    /// The inverse of ``humanReadable``.
    init?(humanReadable text: String) {
        if text.hasSuffix(" ms"), let milliseconds = Int64(text.dropLast(3)) {
            self = .milliseconds(milliseconds)
        } else if text.hasSuffix(" s"), let seconds = Int64(text.dropLast(2)) {
            self = .seconds(seconds)
        } else {
            return nil
        }
    }
}
