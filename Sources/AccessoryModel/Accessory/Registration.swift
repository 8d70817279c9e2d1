/// Where an accessory stands in its lifecycle: paired through AccessorySetupKit, registered with
/// AudioAccessoryKit, invalidated by a re-pairing, or unpaired.
///
/// ```
///  Paired ──register──▶ Registered ──Paired (again)──▶ Invalidated ──register──▶ Registered
///    ▲                       │                              │
///    └──── Paired ◀──── Unpaired ◀────────Unpaired──────────┘
/// ```
public enum Registration: Hashable, Sendable, CaseIterable, CustomStringConvertible {
    /// Paired, not registered: `register` is the next step.
    case paired
    /// Registered: its capabilities are active and `update` is accepted.
    case registered
    /// Re-paired while registered: `update` fails with ``AccessoryControlError/invalidated(reason:)`` until the
    /// accessory registers again.
    case invalidated
    /// Unpaired: the registration ended and the configuration was cleared.
    case unpaired

    public var description: String {
        switch self {
        case .paired: "paired"
        case .registered: "registered"
        case .invalidated: "invalidated"
        case .unpaired: "unpaired"
        }
    }
}
