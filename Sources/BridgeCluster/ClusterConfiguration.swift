import AccessoryModel
import Cluster
import Etcd
import Foundation

/// How a bridge takes part in a cluster (docs/scale-out.md): where etcd is, the cluster's name and number of slots,
/// this member's name, and the state machine's timings.
public struct ClusterConfiguration: Sendable {
    /// etcd's client URL: `etcd://host:port` (or `http://`, `https://`).
    public var endpoint: String
    /// Names the cluster's keys in etcd (`/aab/{name}/`) and its slots' MQTT client ids (`{name}-slot-{s}`).
    public var name: String = "audio"
    /// How many slots the work is split into. `nil` (the default): the count the cluster recorded in etcd, or
    /// ``defaultSlots`` for a new cluster, so that a member follows a reshard across restarts. Given, it must be the
    /// recorded count: a member given another refuses to join (docs/scale-out.md, "How many slots").
    public var slots: ClusterSlots?
    /// A new cluster's slot count when none is given.
    public static let defaultSlots = ClusterSlots(64)!
    /// How many network threads run the member's slots' connections (``MQTTLoopGroup``): by default one per two cores,
    /// at least one. A loop that serves many slots batches across them; two loops each sleep and wake for half as
    /// much, and the kernel's network work, which a member causes as much of as its own (the broker's too, when it
    /// runs beside), needs the other cores (what that is worth: docs/performance-history.md, "Slots on a few network
    /// loops").
    public var networkLoops = max(1, ProcessInfo.processInfo.activeProcessorCount / 2)
    /// This member's name: unique in the cluster (by default the host's name and the process id).
    public var member: String = ClusterConfiguration.defaultMember
    /// TLS towards etcd (production: a client certificate).
    public var tls: EtcdClient.TLS?
    /// Lease, keep-alive and fencing timings.
    public var policy = ClusterStateMachine.Policy()

    public init(endpoint: String) {
        self.endpoint = endpoint
    }

    /// `{host name}-{process id}`.
    public static var defaultMember: String {
        "\(ProcessInfo.processInfo.hostName)-\(ProcessInfo.processInfo.processIdentifier)"
    }

    /// The MQTT client id of a slot's session: stable, so that a new owner resumes the session (and the broker's
    /// session takeover cuts the old owner off).
    public func clientID(of slot: Int) -> String {
        "\(name)-slot-\(slot)"
    }
}
