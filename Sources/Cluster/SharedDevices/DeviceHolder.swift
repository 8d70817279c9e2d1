/// Who holds a shared device, as its holder key says: `{slot}/{put-on revision}/{accessory}`.
public struct DeviceHolder: Hashable, Sendable, CustomStringConvertible {
    public var slot: Int
    /// The etcd revision of the worn listing its claim went by (0: none): its accessory's, or for a rule 6 claim its
    /// slot's newest listing of the device. Rule 6 compares it across slots.
    public var wornRevision: UInt64
    public var accessory: String

    public init(slot: Int, wornRevision: UInt64, accessory: String) {
        self.slot = slot
        self.wornRevision = wornRevision
        self.accessory = accessory
    }

    public init?(parsing value: String) {
        let parts = value.split(separator: "/", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count == 3, let slot = Int(parts[0]), let revision = UInt64(parts[1]) else { return nil }
        self.init(slot: slot, wornRevision: revision, accessory: String(parts[2]))
    }

    public var description: String { "\(slot)/\(wornRevision)/\(accessory)" }
}
