/// A warning about an accessory that is not an error of any one request: AudioAccessoryKit's "common mistakes",
/// and data that may be out of date.
public enum Diagnostic: Hashable, Sendable, CustomStringConvertible {
    /// Registered with `.placement`, yet no placement was reported within the grace period.
    case placementNotReported(after: Duration)
    /// Registered with `.audioSwitching`, yet no audio source was reported within the grace period.
    case sourcesNotReported(after: Duration)
    /// The accessory's hub is offline: its state may be out of date and it takes no part in routing.
    case hubOffline(HubID)

    public var description: String {
        switch self {
        case .placementNotReported(let after):
            "registered with .placement but no placement was reported within \(after.humanReadable) of registering; "
                + "report every placement change, .offHead included"
        case .sourcesNotReported(let after):
            "registered with .audioSwitching but no audio source was reported within \(after.humanReadable) of "
                + "registering; report the Bluetooth addresses of the connected sources"
        case .hubOffline(let hub):
            "hub \(hub) is offline: this state may be out of date and the accessory takes no part in routing"
        }
    }
}

extension Duration {
    /// `30 s`, `1500 ms`.
    var humanReadable: String {
        let milliseconds = wholeMilliseconds
        return milliseconds % 1000 == 0 ? "\(milliseconds / 1000) s" : "\(milliseconds) ms"
    }
}
