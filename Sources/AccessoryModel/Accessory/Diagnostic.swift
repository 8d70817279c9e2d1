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
        case .placementNotReported(let after): Self.placementNotReported.around(after.humanReadable)
        case .sourcesNotReported(let after): Self.sourcesNotReported.around(after.humanReadable)
        case .hubOffline(let hub): Self.hubOffline.around(hub.rawValue)
        case .reported(let text): text
        }
    }

    private static let placementNotReported = Frame(
        "registered with .placement but no placement was reported within ",
        " of registering; report every placement change, .offHead included")
    private static let sourcesNotReported = Frame(
        "registered with .audioSwitching but no audio source was reported within ",
        " of registering; report the Bluetooth addresses of the connected sources")
    private static let hubOffline = Frame(
        "hub ", " is offline: this state may be out of date and the accessory takes no part in routing")

    /// The diagnostic a ``description`` describes: the inverse of ``description``, and ``reported(_:)`` for words
    /// this version does not recognise.
    public init(description text: String) {
        if let middle = Self.placementNotReported.middle(of: text), let duration = Duration(humanReadable: middle) {
            self = .placementNotReported(after: duration)
        } else if let middle = Self.sourcesNotReported.middle(of: text),
            let duration = Duration(humanReadable: middle)
        {
            self = .sourcesNotReported(after: duration)
        } else if let middle = Self.hubOffline.middle(of: text), let hub = HubID(middle) {
            self = .hubOffline(hub)
        } else {
            self = .reported(text)
        }
    }

    /// The fixed words of a diagnostic around its variable part.
    private struct Frame: Sendable {
        let prefix: String
        let suffix: String
        private let prefixBytes: [UInt8]
        private let suffixBytes: [UInt8]

        init(_ prefix: String, _ suffix: String) {
            (self.prefix, self.suffix) = (prefix, suffix)
            (prefixBytes, suffixBytes) = (Array(prefix.utf8), Array(suffix.utf8))
        }

        func around(_ middle: String) -> String { prefix + middle + suffix }

        /// What lies between the prefix and the suffix in `text`, compared byte for byte (a restart parses the
        /// diagnostics of every accessory that has some: comparing characters cost a seventh of it). Both ends are
        /// ASCII, so the cuts fall between scalars.
        func middle(of text: String) -> String? {
            var text = text
            return text.withUTF8 { bytes in
                let end = bytes.count - suffixBytes.count
                guard end > prefixBytes.count, bytes.prefix(prefixBytes.count).elementsEqual(prefixBytes),
                    bytes[end...].elementsEqual(suffixBytes)
                else { return nil }
                return String(decoding: bytes[prefixBytes.count..<end], as: UTF8.self)
            }
        }
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
