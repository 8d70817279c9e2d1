import Synchronization

/// An etcd lease, as etcd granted it: never 0, which etcd reads as "no lease" (a key that lives until deleted).
public struct Lease: Hashable, Sendable, CustomStringConvertible, ExpressibleByIntegerLiteral {
    public let id: Int64

    /// `nil` for 0, which is no lease.
    public init?(id: Int64) {
        guard id != 0 else { return nil }
        self.id = id
    }

    public init(integerLiteral id: Int64) {
        precondition(id != 0, "0 is no lease")
        self.id = id
    }

    public var description: String { "\(id)" }
}

/// How long a key lives: with a member's lease (etcd deletes it when the lease ends), or until deleted, said so on
/// purpose (a device's listers, which outlive any member). There is no default: no key is written without a lease by
/// accident.
public enum KeyLifetime: Hashable, Sendable {
    /// Bound to the lease of the session the write is made in.
    case session
    case untilDeleted
}

/// A member's lease as etcd's `concurrency.Session` has it (`Lease()`, `Done()`, `Close()`): the lease, whether it is
/// still this member's to act under, and its end. Every etcd call about keys is made in one
/// (``CoordinationStore``); a session that is no longer ours makes none.
///
/// It is ours from the registration of the member under its lease until the member's fence drops (``close()``): the
/// lease may expire then (etcd unreachable past the keep-alives' margin), or the member leaves. The cluster's state
/// machine decides both; the shell closes the session when it says so.
public final class LeaseSession: Sendable {
    /// Why a call was not made: its session is closed.
    public struct Closed: Error, CustomStringConvertible {
        public let lease: Lease
        public var description: String { "lease \(lease) is no longer this member's: no etcd call is made under it" }
    }

    public let lease: Lease
    private let open = Atomic(true)

    public init(lease: Lease) {
        self.lease = lease
    }

    /// Whether the lease is still this member's to act under.
    public var isOurs: Bool { open.load(ordering: .acquiring) }

    /// Throws ``Closed`` unless the lease is still ours: a store calls it before each call about keys.
    public func check() throws(Closed) {
        guard isOurs else { throw Closed(lease: lease) }
    }

    /// The lease is no longer ours to act under: no call is made in this session from now on. Idempotent.
    public func close() {
        open.store(false, ordering: .releasing)
    }
}
