import Cluster
import CoreMetrics

/// The cluster's metrics, besides every slot's bridge metrics: slots owned, takeovers and stops, fence rejections,
/// members, the lease's freshness, and etcd's round trips.
struct ClusterMetrics: Sendable {
    /// Slots served by this member.
    let slotsOwned: Gauge
    /// Live members, as etcd says.
    let members: Gauge
    /// 1 while the lease is fresh enough for the slots to act, else 0.
    let leaseFresh: Gauge
    /// Slots this member started serving (after a claim: a takeover of a slot nobody held, or that another member
    /// released or lost).
    let takeovers: Counter
    /// Slots this member stopped, by reason (`handover`, `fenced`, `shutdown`).
    let stops: [ClusterStateMachine.StopReason: Counter]
    /// Fence rejections seen: a slot's connection held back because the lease was not fresh, and claims etcd
    /// refused because another member held the slot.
    let fenceRejections: [String: Counter]
    /// etcd calls' round trips, by call.
    let etcdRoundTrip: [String: Timer]
    /// etcd calls that failed, by call.
    let etcdFailures: [String: Counter]
    /// Claims of shared devices (docs/scale-out.md), by outcome (`claimed`, `refused`, `withdrawn`).
    let deviceClaims: [String: Counter]

    /// The calls of membership and slots, then those about playing devices (a slot's listings, worn listings, and
    /// shared devices' claims and releases).
    static let calls = [
        "grant", "keepalive", "revoke", "register", "read", "claim", "release", "lister", "worn", "device-claim",
        "device-release",
    ]

    static let histogramBuckets: [String: [Duration]] = [
        "accessory_bridge_cluster_etcd_round_trip_seconds": [
            .microseconds(250), .microseconds(500), .milliseconds(1), .milliseconds(2), .milliseconds(5),
            .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100), .milliseconds(250),
            .milliseconds(500), .seconds(1),
        ]
    ]

    init(factory: any MetricsFactory) {
        slotsOwned = Gauge(label: "accessory_bridge_cluster_slots_owned", factory: factory)
        members = Gauge(label: "accessory_bridge_cluster_members", factory: factory)
        leaseFresh = Gauge(label: "accessory_bridge_cluster_lease_fresh", factory: factory)
        takeovers = Counter(label: "accessory_bridge_cluster_takeovers_total", factory: factory)
        stops = Dictionary(
            uniqueKeysWithValues: [ClusterStateMachine.StopReason.handover, .fenced, .shutdown].map {
                ($0, Counter(label: "accessory_bridge_cluster_slot_stops_total", dimensions: [("reason", "\($0)")], factory: factory))
            })
        fenceRejections = Dictionary(
            uniqueKeysWithValues: ["connection", "claim"].map {
                ($0, Counter(label: "accessory_bridge_cluster_fence_rejections_total", dimensions: [("what", $0)], factory: factory))
            })
        etcdRoundTrip = Dictionary(
            uniqueKeysWithValues: Self.calls.map {
                ($0, Timer(label: "accessory_bridge_cluster_etcd_round_trip_seconds", dimensions: [("call", $0)], factory: factory))
            })
        deviceClaims = Dictionary(
            uniqueKeysWithValues: ["claimed", "refused", "withdrawn"].map {
                ($0, Counter(label: "accessory_bridge_cluster_device_claims_total", dimensions: [("outcome", $0)], factory: factory))
            })
        etcdFailures = Dictionary(
            uniqueKeysWithValues: Self.calls.map {
                ($0, Counter(label: "accessory_bridge_cluster_etcd_failures_total", dimensions: [("call", $0)], factory: factory))
            })
    }
}
