/// The id of a hub, the device that relays its accessories' telemetry: 1–64 of `A–Z`, `a–z`, `0–9`, `_`, `-`.
public struct HubID: Identifier {
    public let rawValue: String

    public init(grammarChecked rawValue: String) { self.rawValue = rawValue }
}
