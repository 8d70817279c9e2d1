/// What a cluster of bridges asks of etcd (docs/scale-out.md): a lease kept alive, keys bound to it, a create-if-absent
/// claim whose revision is an epoch, a delete that only its claimer can make, a read and a watch of a prefix. The
/// `Etcd` module's client speaks it to a real etcd; only the pure parts' unit tests use another.
public protocol CoordinationStore: Sendable {
    /// Grants a lease of `ttl` (whole seconds); its id.
    func grantLease(ttl: Duration) async throws -> Int64

    /// Keeps `lease` alive: `false` when it expired (or was revoked) meanwhile.
    func keepAlive(lease: Int64) async throws -> Bool

    /// Ends `lease` and deletes every key bound to it; a lease already gone is no error.
    func revoke(lease: Int64) async throws

    /// Puts `value` at `key`, bound to `lease`.
    func put(_ key: String, value: String, lease: Int64) async throws

    /// Creates `key` with `value` on `lease` unless it exists (one transaction).
    func create(_ key: String, value: String, lease: Int64) async throws -> CreateOutcome

    /// Deletes `key` if it is still the one created at `revision` (one transaction): whether it did.
    func delete(_ key: String, createdAt revision: UInt64) async throws -> Bool

    /// Every key under `prefix`, and the store's revision at that read.
    func read(prefix: String) async throws -> CoordinationSnapshot

    /// The changes under `prefix` after `revision`, as they happen, a transaction's at a time. The stream ends
    /// (finishes or throws) when the watch breaks: read again, and watch from there.
    func watch(prefix: String, after revision: Int64) -> AsyncThrowingStream<[CoordinationChange], any Error>
}

/// A key, its value, and the revision that created it.
public struct CoordinationEntry: Hashable, Sendable {
    public var key: String
    public var value: String
    public var createRevision: UInt64

    public init(key: String, value: String, createRevision: UInt64) {
        self.key = key
        self.value = value
        self.createRevision = createRevision
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
    case delete(key: String)
}

public enum CreateOutcome: Hashable, Sendable {
    /// Created, at this revision.
    case created(revision: UInt64)
    /// The key exists: its value, and the revision that created it.
    case exists(CoordinationEntry)
}
