/// Why a request about an accessory failed: AudioAccessoryKit's `AccessoryControlDevice.Error`, each with a
/// human-readable reason.
///
/// Match a kind without its reason as AudioAccessoryKit code does: `catch AccessoryControlError.invalidated { … }`.
public enum AccessoryControlError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The accessory does not support the requested capability.
    case accessoryNotCapable(reason: String)
    /// The request is invalid: wrong state, wrong hub or malformed values.
    case invalidRequest(reason: String)
    /// The accessory's registration has been invalidated (it was re-paired or unpaired); register it again.
    case invalidated(reason: String)
    /// Anything unexpected.
    case unknown(reason: String)

    /// The kind of error, without its reason.
    public enum Code: String, Hashable, Sendable, CaseIterable {
        case accessoryNotCapable
        case invalidRequest
        case invalidated
        case unknown
    }

    public var code: Code {
        switch self {
        case .accessoryNotCapable: .accessoryNotCapable
        case .invalidRequest: .invalidRequest
        case .invalidated: .invalidated
        case .unknown: .unknown
        }
    }

    public var reason: String {
        switch self {
        case .accessoryNotCapable(let reason), .invalidRequest(let reason), .invalidated(let reason),
            .unknown(let reason):
            reason
        }
    }

    /// Creates the error of a given kind.
    public init(_ code: Code, reason: String) {
        switch code {
        case .accessoryNotCapable: self = .accessoryNotCapable(reason: reason)
        case .invalidRequest: self = .invalidRequest(reason: reason)
        case .invalidated: self = .invalidated(reason: reason)
        case .unknown: self = .unknown(reason: reason)
        }
    }

    /// `invalidRequest: accessory hp1 is not paired`.
    public var description: String { "\(code.rawValue): \(reason)" }
}
