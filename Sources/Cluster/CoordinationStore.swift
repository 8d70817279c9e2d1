/// What a cluster of bridges asks of etcd (docs/scale-out.md): a lease kept alive, keys bound to it, a create-if-absent
/// claim whose revision is an epoch, a delete that only its claimer can make, a read and a watch of a prefix. Every
/// call about keys is made in the member's ``LeaseSession``, and none once the session closed: a member whose lease
/// may have expired writes nothing. The `Etcd` module's client speaks it to a real etcd.
public protocol CoordinationStore: Sendable {
    /// Grants a lease of `ttl` (whole seconds).
    func grantLease(ttl: Duration) async throws -> Lease

    /// Keeps `lease` alive: `false` when it expired (or was revoked) meanwhile.
    func keepAlive(_ lease: Lease) async throws -> Bool

    /// Ends `lease` and deletes every key bound to it; a lease already gone is no error.
    func revoke(_ lease: Lease) async throws

    /// Puts `value` at `key`, bound to the session's lease.
    func put(_ key: String, value: String, in session: LeaseSession) async throws

    /// Creates `key` with `value`, bound to the session's lease, unless it exists (one transaction).
    func create(_ key: String, value: String, in session: LeaseSession) async throws -> CreateOutcome

    /// Deletes `key` if it is still the one created at `revision` (one transaction): whether it did.
    func delete(_ key: String, createdAt revision: UInt64, in session: LeaseSession) async throws -> Bool

    /// The key, if it exists.
    func get(_ key: String, in session: LeaseSession) async throws -> CoordinationEntry?

    /// Runs `transaction` in one step: its writes when every condition holds, else nothing; its puts bound to the
    /// session's lease or not, as each says (``KeyLifetime``). The revision of the writes, or `nil` when a condition
    /// failed.
    func commit(_ transaction: CoordinationTransaction, in session: LeaseSession) async throws -> UInt64?

    /// Every key under `prefix`, and the store's revision at that read.
    func read(prefix: String, in session: LeaseSession) async throws -> CoordinationSnapshot

    /// The changes under `prefix` after `revision`, as they happen, a transaction's at a time. The stream ends
    /// (finishes or throws) when the watch breaks: read again, and watch from there.
    func watch(prefix: String, after revision: Int64) -> AsyncThrowingStream<[CoordinationChange], any Error>
}

/// A key, its value, the revision that created it and the one that last wrote it.
public struct CoordinationEntry: Hashable, Sendable {
    public var key: String
    public var value: String
    public var createRevision: UInt64
    public var modRevision: UInt64

    public init(key: String, value: String, createRevision: UInt64, modRevision: UInt64 = 0) {
        self.key = key
        self.value = value
        self.createRevision = createRevision
        self.modRevision = modRevision == 0 ? createRevision : modRevision
    }
}

/// A compare-and-swap of etcd's kind: writes that happen only if each key is still at the revision read.
public struct CoordinationTransaction: Hashable, Sendable {
    /// A key that must still have been last written at `modRevision` (0: it must not exist).
    public struct Condition: Hashable, Sendable {
        public var key: String
        public var modRevision: UInt64

        public init(key: String, modRevision: UInt64) {
            self.key = key
            self.modRevision = modRevision
        }
    }

    /// A key to put, with how long it lives (no default: see ``KeyLifetime``).
    public struct Put: Hashable, Sendable {
        public var key: String
        public var value: String
        public var lifetime: KeyLifetime

        public init(key: String, value: String, lifetime: KeyLifetime) {
            self.key = key
            self.value = value
            self.lifetime = lifetime
        }
    }

    public var conditions: [Condition]
    public var puts: [Put]
    public var deletes: [String]
    /// Every key under each of these prefixes is deleted (a reshard's clean-up of the device listings).
    public var prefixDeletes: [String]

    public init(conditions: [Condition] = [], puts: [Put] = [], deletes: [String] = [], prefixDeletes: [String] = []) {
        self.conditions = conditions
        self.puts = puts
        self.deletes = deletes
        self.prefixDeletes = prefixDeletes
    }
}

public struct CoordinationSnapshot: Hashable, Sendable {
    public var entries: [CoordinationEntry]
    public var revision: Int64

    public init(entries: [CoordinationEntry], revision: Int64) {
        self.entries = entries
        self.revision = revision
    }
}

public enum CoordinationChange: Hashable, Sendable {
    case put(CoordinationEntry)
    /// The key was deleted at `revision`.
    case delete(key: String, revision: UInt64)
}

public enum CreateOutcome: Hashable, Sendable {
    /// Created, at this revision.
    case created(revision: UInt64)
    /// The key exists: its value, and the revision that created it.
    case exists(CoordinationEntry)
}
