/// The id of an audio accessory, unique across all hubs: 1–64 of `A–Z`, `a–z`, `0–9`, `_`, `-`.
public struct AccessoryID: Identifier {
    public let rawValue: String

    public init(grammarChecked rawValue: String) { self.rawValue = rawValue }
}
