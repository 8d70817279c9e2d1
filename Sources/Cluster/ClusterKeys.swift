/// Where a cluster keeps its state in etcd (docs/scale-out.md), all under `/aab/{cluster}/`:
///
/// | key | value | lease |
/// |---|---|---|
/// | `/aab/{cluster}/members/{member}` | the member's name | the member's |
/// | `/aab/{cluster}/slots/{slot}` | the holder's name (the key's create revision is the slot's epoch) | the holder's |
public struct ClusterKeys: Hashable, Sendable {
    public let cluster: String

    public init(cluster: String) {
        self.cluster = cluster
    }

    /// Everything of the cluster: what a member reads and watches.
    public var prefix: String { "/aab/\(cluster)/" }

    public func member(_ name: String) -> String { "\(prefix)members/\(name)" }

    public func slot(_ slot: Int) -> String { "\(prefix)slots/\(slot)" }

    /// What a key of the cluster is about.
    public enum Subject: Hashable, Sendable {
        case member(String)
        case slot(Int)
    }

    /// What `key` is about, if it is one of the cluster's.
    public func subject(of key: String) -> Subject? {
        guard key.hasPrefix(prefix) else { return nil }
        let rest = key.dropFirst(prefix.count)
        if rest.hasPrefix("members/") {
            let name = rest.dropFirst("members/".count)
            return name.isEmpty ? nil : .member(String(name))
        }
        if rest.hasPrefix("slots/"), let slot = Int(rest.dropFirst("slots/".count)), slot >= 0 {
            return .slot(slot)
        }
        return nil
    }
}
