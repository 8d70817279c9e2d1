import AccessoryModel

// The enums of types.proto and their model counterparts. Inbound values that are UNSPECIFIED where a value is
// required, or unknown to this version, become an `invalidRequest` that names the field.

extension Capabilities {
    /// The raw value the wire's capability `value` stands for: value `n` is bit `n - 1`, known to this version or not
    /// (a later version's capabilities are kept and shown, never dropped); `nil` for UNSPECIFIED or beyond 32.
    static func bit(of value: Audioaccessory_V1_Capability) -> Capabilities? {
        guard (1...32).contains(value.rawValue) else { return nil }
        return Capabilities(rawValue: 1 << UInt32(value.rawValue - 1))
    }
}

/// The wire list of each combination of known capabilities, indexed by raw value: built once, shared by every
/// message (a copy of an array is free until it is changed).
private let capabilityLists: [[Audioaccessory_V1_Capability]] = (0..<(1 << Capabilities.known.count)).map { raw in
    (0..<Capabilities.known.count).filter { raw & (1 << $0) != 0 }.map { Audioaccessory_V1_Capability(rawValue: $0 + 1)! }
}

extension Array where Element == Audioaccessory_V1_Capability {
    /// The wire list of `capabilities`, in declaration order, bits this version does not know last (as numbers).
    init(_ capabilities: Capabilities) {
        self = capabilityLists[Int(capabilities.intersection(.all).rawValue)]
        let unknown = capabilities.unknown.rawValue
        guard unknown != 0 else { return }
        for bit in 0..<32 where unknown & (1 << bit) != 0 {
            append(Audioaccessory_V1_Capability(rawValue: bit + 1)!)
        }
    }

    /// The capabilities of a repeated `Capability` field named `field`; values this version does not know are kept.
    func capabilities(field: String) throws(AccessoryControlError) -> Capabilities {
        var capabilities: Capabilities = []
        for value in self {
            guard let bit = Capabilities.bit(of: value) else {
                throw .invalidRequest(
                    reason: value == .unspecified
                        ? "\(field) holds CAPABILITY_UNSPECIFIED, which is not a capability"
                        : "\(field) holds \(value.rawValue), beyond the 32 capabilities a set can hold")
            }
            capabilities.insert(bit)
        }
        return capabilities
    }
}

extension Audioaccessory_V1_Placement {
    /// The wire value of `placement`; UNSPECIFIED for `nil`.
    init(_ placement: Placement?) {
        switch placement {
        case nil: self = .unspecified
        case .inEar: self = .inEar
        case .onHead: self = .onHead
        case .overTheEar: self = .overTheEar
        case .offHead: self = .offHead
        }
    }

    /// The placement; `nil` for UNSPECIFIED.
    func placement(field: String) throws(AccessoryControlError) -> Placement? {
        switch self {
        case .unspecified: nil
        case .inEar: .inEar
        case .onHead: .onHead
        case .overTheEar: .overTheEar
        case .offHead: .offHead
        case .UNRECOGNIZED(let raw):
            throw .invalidRequest(reason: "\(field) is \(raw), which is not a known Placement")
        }
    }
}

extension Audioaccessory_V1_Activity {
    init(_ activity: Activity?) {
        switch activity {
        case nil: self = .unspecified
        case .idle: self = .idle
        case .media: self = .media
        case .call: self = .call
        }
    }

    /// The activity; `nil` for UNSPECIFIED (the report does not say).
    func activity(field: String) throws(AccessoryControlError) -> Activity? {
        switch self {
        case .unspecified: nil
        case .idle: .idle
        case .media: .media
        case .call: .call
        case .UNRECOGNIZED(let raw):
            throw .invalidRequest(reason: "\(field) is \(raw), which is not a known Activity")
        }
    }
}

extension Audioaccessory_V1_Registration {
    init(_ registration: Registration) {
        switch registration {
        case .paired: self = .paired
        case .registered: self = .registered
        case .invalidated: self = .invalidated
        case .unpaired: self = .unpaired
        }
    }

    /// The registration; UNSPECIFIED or unknown values are an error.
    func registration(field: String) throws(AccessoryControlError) -> Registration {
        switch self {
        case .paired: .paired
        case .registered: .registered
        case .invalidated: .invalidated
        case .unpaired: .unpaired
        case .unspecified: throw .invalidRequest(reason: "\(field) is REGISTRATION_UNSPECIFIED")
        case .UNRECOGNIZED(let raw): throw .invalidRequest(reason: "\(field) is \(raw), which is not a known Registration")
        }
    }
}

extension Audioaccessory_V1_Action {
    init(_ action: SwitchCommand.Action) {
        switch action {
        case .routeToAccessory: self = .routeToAccessory
        case .pause: self = .pause
        case .resume: self = .resume
        case .release: self = .release
        }
    }

    /// The action; UNSPECIFIED or unknown values are an error.
    func action(field: String) throws(AccessoryControlError) -> SwitchCommand.Action {
        switch self {
        case .routeToAccessory: .routeToAccessory
        case .pause: .pause
        case .resume: .resume
        case .release: .release
        case .unspecified: throw .invalidRequest(reason: "\(field) is ACTION_UNSPECIFIED")
        case .UNRECOGNIZED(let raw): throw .invalidRequest(reason: "\(field) is \(raw), which is not a known Action")
        }
    }
}

extension Audioaccessory_V1_Reason {
    init(_ reason: SwitchCommand.Reason) {
        switch reason {
        case .accessoryIneligible: self = .accessoryIneligible
        case .putOn: self = .putOn
        case .takenOff: self = .takenOff
        case .sourceActivated: self = .sourceActivated
        case .sourceDisconnected: self = .sourceDisconnected
        case .registrationEnded: self = .registrationEnded
        case .interruptionEnded: self = .interruptionEnded
        case .controlsChanged: self = .controlsChanged
        }
    }

    /// The reason; UNSPECIFIED or unknown values are an error.
    func reason(field: String) throws(AccessoryControlError) -> SwitchCommand.Reason {
        switch self {
        case .accessoryIneligible: .accessoryIneligible
        case .putOn: .putOn
        case .takenOff: .takenOff
        case .sourceActivated: .sourceActivated
        case .sourceDisconnected: .sourceDisconnected
        case .registrationEnded: .registrationEnded
        case .interruptionEnded: .interruptionEnded
        case .controlsChanged: .controlsChanged
        case .unspecified: throw .invalidRequest(reason: "\(field) is REASON_UNSPECIFIED")
        case .UNRECOGNIZED(let raw): throw .invalidRequest(reason: "\(field) is \(raw), which is not a known Reason")
        }
    }
}

extension Audioaccessory_V1_ErrorCode {
    /// The wire code of a request's outcome: NONE for success.
    init(_ code: AccessoryControlError.Code?) {
        switch code {
        case nil: self = .none
        case .accessoryNotCapable: self = .accessoryNotCapable
        case .invalidRequest: self = .invalidRequest
        case .invalidated: self = .invalidated
        case .unknown: self = .unknown
        }
    }

    /// The error kind, `nil` for NONE; UNSPECIFIED and values unknown to this version read as `unknown`.
    var code: AccessoryControlError.Code? {
        switch self {
        case .none: nil
        case .accessoryNotCapable: .accessoryNotCapable
        case .invalidRequest: .invalidRequest
        case .invalidated: .invalidated
        case .unknown, .unspecified, .UNRECOGNIZED: .unknown
        }
    }
}
