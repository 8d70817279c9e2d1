import AccessoryModel

/// Where a cluster keeps its state in etcd (docs/scale-out.md). What every member reads and watches is under
/// `/aab/{cluster}/`, and small: members, claims, and the shared devices only:
///
/// | key | value | lease |
/// |---|---|---|
/// | `/aab/{cluster}/layout` | the cluster's slot count (`64`), written by its first member | none |
/// | `/aab/{cluster}/members/{member}` | the member's name | the member's |
/// | `/aab/{cluster}/slots/{slot}` | the holder's name (the key's create revision is the slot's epoch) | the holder's |
/// | `/aab/{cluster}/shared/{device}` | the slots that list it, two or more (`3,7`) | none |
/// | `/aab/{cluster}/holders/{device}` | `{slot}/{put-on revision}/{accessory}` (its mod revision is the device's epoch) | the holder's |
///
/// Which slots list each device, and which worn accessories list each shared one, are written and read one device at
/// a time, never watched: under `/aab-devices/{cluster}/`, so that a fleet's million devices stay out of every
/// member's read.
///
/// | key | value | lease |
/// |---|---|---|
/// | `/aab-devices/{cluster}/listers/{device}` | the slots that list it (`3`, `3,7`) | none |
/// | `/aab-devices/{cluster}/worn/{device}/{accessory}` | its slot (the key's mod revision orders its put-on) | the writer's |
public struct ClusterKeys: Hashable, Sendable {
    public let cluster: String

    public init(cluster: String) {
        self.cluster = cluster
    }

    /// Everything of the cluster: what a member reads and watches.
    public var prefix: String { "/aab/\(cluster)/" }

    /// The cluster's slot count, as its first member wrote it: a member given another refuses to join.
    public var layout: String { "\(prefix)layout" }

    public func member(_ name: String) -> String { "\(prefix)members/\(name)" }

    public func slot(_ slot: Int) -> String { "\(prefix)slots/\(slot)" }

    public func shared(_ device: BluetoothAddress) -> String { "\(prefix)shared/\(device.topicID)" }

    public func holder(_ device: BluetoothAddress) -> String { "\(prefix)holders/\(device.topicID)" }

    public func listers(_ device: BluetoothAddress) -> String { "/aab-devices/\(cluster)/listers/\(device.topicID)" }

    /// Every device listing of the cluster, by slot number (listers, worn accessories): what a reshard clears, every
    /// member stopped, for the slots to list their devices again under the new count.
    public var deviceListings: [String] { ["/aab-devices/\(cluster)/", "\(prefix)shared/"] }

    /// Every worn accessory that lists `device`, one key each.
    public func wornListings(_ device: BluetoothAddress) -> String { "/aab-devices/\(cluster)/worn/\(device.topicID)/" }

    public func worn(_ device: BluetoothAddress, by accessory: AccessoryID) -> String {
        wornListings(device) + accessory.rawValue
    }

    /// What a key of the cluster is about.
    public enum Subject: Hashable, Sendable {
        /// The slot count recorded (its value).
        case layout
        case member(String)
        case slot(Int)
        case shared(BluetoothAddress)
        case holder(BluetoothAddress)
    }

    /// What `key` is about, if it is one of the cluster's.
    public func subject(of key: String) -> Subject? {
        guard key.hasPrefix(prefix) else { return nil }
        let rest = key.dropFirst(prefix.count)
        if rest == "layout" { return .layout }
        if rest.hasPrefix("members/") {
            let name = rest.dropFirst("members/".count)
            return name.isEmpty ? nil : .member(String(name))
        }
        if rest.hasPrefix("slots/"), let slot = Int(rest.dropFirst("slots/".count)), slot >= 0 {
            return .slot(slot)
        }
        if rest.hasPrefix("shared/"), let device = BluetoothAddress(topicID: rest.dropFirst("shared/".count)) {
            return .shared(device)
        }
        if rest.hasPrefix("holders/"), let device = BluetoothAddress(topicID: rest.dropFirst("holders/".count)) {
            return .holder(device)
        }
        return nil
    }
}
