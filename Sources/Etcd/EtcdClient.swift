import AsyncHTTPClient
import Cluster
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import NIOSSL

/// etcd's v3 API through its gRPC-JSON gateway (`/v3/...`) over HTTP/1.1, with async-http-client: the cluster's
/// ``CoordinationStore``. Every call is one POST with a deadline (etcd blocks requests while it has no leader); a
/// keep-alive is a request of its own (the gateway answers a stream only once its request body ended), and a watch
/// a long-lived request on a connection of its own, read line by line. The lease's calls (grant, keep-alive, revoke)
/// have connections of their own too: a keep-alive never waits behind a busy member's claims, device requests or
/// watches for a connection, which would let its lease lapse while etcd answers.
///
/// Over TLS (`https://`), with a CA that signs etcd's certificate and, for client-certificate authentication, the
/// client's certificate and key (PEM files).
public final class EtcdClient: CoordinationStore {
    public struct TLS: Hashable, Sendable {
        public var caFile: String
        public var certificateFile: String?
        public var keyFile: String?

        public init(caFile: String, certificateFile: String? = nil, keyFile: String? = nil) {
            self.caFile = caFile
            self.certificateFile = certificateFile
            self.keyFile = keyFile
        }
    }

    /// A failure of a call: etcd's answer (its gRPC code and message), or no answer.
    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    private let endpoint: String
    /// Every call but the lease's, and the watches.
    private let http: HTTPClient
    /// The lease's calls (``leaseConnections``).
    private let leaseHTTP: HTTPClient
    private let timeout: TimeAmount
    private let logger: Logger

    /// - Parameters:
    ///   - endpoint: `http://host:port` or `https://host:port` (`etcd://` is read as `http://`).
    ///   - timeout: how long a call may take.
    public init(endpoint: String, tls: TLS? = nil, timeout: Duration = .seconds(1), logger: Logger) throws {
        var endpoint = endpoint
        if endpoint.hasPrefix("etcd://") { endpoint = "http://" + endpoint.dropFirst("etcd://".count) }
        if endpoint.hasPrefix("etcds://") { endpoint = "https://" + endpoint.dropFirst("etcds://".count) }
        while endpoint.hasSuffix("/") { endpoint.removeLast() }
        guard endpoint.hasPrefix("http://") || endpoint.hasPrefix("https://") else {
            throw Failure(description: "etcd endpoint '\(endpoint)' must be etcd://host:port, http://… or https://…")
        }
        self.endpoint = endpoint
        self.timeout = TimeAmount(timeout)
        self.logger = logger
        var configuration = HTTPClient.Configuration()
        if let tls {
            var tlsConfiguration = TLSConfiguration.makeClientConfiguration()
            tlsConfiguration.trustRoots = .file(tls.caFile)
            if let certificate = tls.certificateFile, let key = tls.keyFile {
                tlsConfiguration.certificateChain = try NIOSSLCertificate.fromPEMFile(certificate).map { .certificate($0) }
                tlsConfiguration.privateKey = .privateKey(try NIOSSLPrivateKey(file: key, format: .pem))
            }
            configuration.tlsConfiguration = tlsConfiguration
        }
        func client(connections: Int) -> HTTPClient {
            configuration.connectionPool = .init(
                idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: connections)
            return HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)
        }
        http = client(connections: Self.callConnections)
        leaseHTTP = client(connections: Self.leaseConnections)
    }

    /// How many connections the calls and watches share (watches hold one each); more calls wait for one.
    public static let callConnections = 16
    /// How many connections the lease's calls have: one keep-alive at a time, a grant, a revoke.
    public static let leaseConnections = 2

    /// Closes the connections; call once, when done.
    public func shutdown() async {
        try? await http.shutdown()
        try? await leaseHTTP.shutdown()
    }

    // MARK: - CoordinationStore

    public func grantLease(ttl: Duration) async throws -> Lease {
        let granted: Gateway.LeaseGranted = try await call(
            "/v3/lease/grant", Gateway.LeaseGrant(TTL: "\(max(2, ttl.components.seconds))"), on: leaseHTTP)
        guard let lease = granted.ID.flatMap(Int64.init).flatMap(Lease.init(id:)) else {
            throw Failure(description: "etcd granted no lease: \(granted.error ?? "no ID in its answer")")
        }
        return lease
    }

    public func keepAlive(_ lease: Lease) async throws -> Bool {
        let answer: Gateway.KeepAliveResult = try await call(
            "/v3/lease/keepalive", Gateway.LeaseID(ID: "\(lease.id)"), on: leaseHTTP)
        // A lease that expired or was revoked comes back without its TTL.
        return (answer.result?.TTL.flatMap(Int64.init) ?? 0) > 0
    }

    public func revoke(_ lease: Lease) async throws {
        do {
            let _: Gateway.RangeResponse = try await call(
                "/v3/lease/revoke", Gateway.LeaseID(ID: "\(lease.id)"), on: leaseHTTP)
        } catch let failure as Failure where failure.description.contains("lease not found") {
            // Gone already: expired, or revoked before.
        }
    }

    public func put(_ key: String, value: String, in session: LeaseSession) async throws {
        try session.check()
        let _: Gateway.RangeResponse = try await call(
            "/v3/kv/put",
            Gateway.Put(key: Gateway.encode(key), value: Gateway.encode(value), lease: "\(session.lease.id)"))
    }

    public func create(_ key: String, value: String, in session: LeaseSession) async throws -> CreateOutcome {
        try session.check()
        let encoded = Gateway.encode(key)
        let txn = Gateway.Txn(
            compare: [.init(key: encoded, target: "CREATE", result: "EQUAL", create_revision: "0")],
            success: [.init(request_put: .init(key: encoded, value: Gateway.encode(value), lease: "\(session.lease.id)"))],
            failure: [.init(request_range: .init(key: encoded))])
        let answer: Gateway.TxnResponse = try await call("/v3/kv/txn", txn)
        if answer.succeeded == true {
            // The put is the transaction's one write: its revision is the key's create revision.
            guard let revision = answer.header?.revision.flatMap(UInt64.init) else {
                throw Failure(description: "etcd's answer to a claim has no revision")
            }
            return .created(revision: revision)
        }
        let existing = answer.responses?.first?.response_range?.kvs?.first
        return .exists(
            CoordinationEntry(
                key: key, value: Gateway.decode(existing?.value),
                createRevision: existing?.create_revision.flatMap(UInt64.init) ?? 0))
    }

    public func delete(_ key: String, createdAt revision: UInt64, in session: LeaseSession) async throws -> Bool {
        try session.check()
        let encoded = Gateway.encode(key)
        let txn = Gateway.Txn(
            compare: [.init(key: encoded, target: "CREATE", result: "EQUAL", create_revision: "\(revision)")],
            success: [.init(request_delete_range: .init(key: encoded))], failure: [])
        let answer: Gateway.TxnResponse = try await call("/v3/kv/txn", txn)
        return answer.succeeded == true
    }

    public func get(_ key: String, in session: LeaseSession) async throws -> CoordinationEntry? {
        try session.check()
        let answer: Gateway.RangeResponse = try await call("/v3/kv/range", Gateway.Range(key: Gateway.encode(key)))
        return answer.kvs?.first.map(Self.entry)
    }

    public func commit(_ transaction: CoordinationTransaction, in session: LeaseSession) async throws -> UInt64? {
        try session.check()
        let compare = transaction.conditions.map { condition in
            // A key that does not exist has a mod revision of 0 to etcd's compare.
            Gateway.Compare(
                key: Gateway.encode(condition.key), target: "MOD", result: "EQUAL",
                mod_revision: "\(condition.modRevision)")
        }
        let writes =
            transaction.puts.map {
                Gateway.RequestOp(
                    request_put: .init(
                        key: Gateway.encode($0.key), value: Gateway.encode($0.value),
                        lease: $0.lifetime == .session ? "\(session.lease.id)" : "0"))
            } + transaction.deletes.map { Gateway.RequestOp(request_delete_range: .init(key: Gateway.encode($0))) }
            + transaction.prefixDeletes.map {
                Gateway.RequestOp(
                    request_delete_range: .init(key: Gateway.encode($0), range_end: Gateway.rangeEnd(of: $0)))
            }
        let answer: Gateway.TxnResponse = try await call(
            "/v3/kv/txn", Gateway.Txn(compare: compare, success: writes, failure: []))
        guard answer.succeeded == true else { return nil }
        guard let revision = answer.header?.revision.flatMap(UInt64.init) else {
            throw Failure(description: "etcd's answer to a transaction has no revision")
        }
        return revision
    }

    private static func entry(_ kv: Gateway.KeyValue) -> CoordinationEntry {
        CoordinationEntry(
            key: Gateway.decode(kv.key), value: Gateway.decode(kv.value),
            createRevision: kv.create_revision.flatMap(UInt64.init) ?? 0,
            modRevision: kv.mod_revision.flatMap(UInt64.init) ?? 0)
    }

    public func read(prefix: String, in session: LeaseSession) async throws -> CoordinationSnapshot {
        try session.check()
        let answer: Gateway.RangeResponse = try await call(
            "/v3/kv/range", Gateway.Range(key: Gateway.encode(prefix), range_end: Gateway.rangeEnd(of: prefix)))
        let entries = (answer.kvs ?? []).map(Self.entry)
        return CoordinationSnapshot(entries: entries, revision: answer.header?.revision.flatMap(Int64.init) ?? 0)
    }

    public func watch(prefix: String, after revision: Int64) -> AsyncThrowingStream<[CoordinationChange], any Error> {
        let (stream, continuation) = AsyncThrowingStream<[CoordinationChange], any Error>.makeStream()
        let task = Task { [self] in
            do {
                try await runWatch(prefix: prefix, after: revision, into: continuation)
                continuation.finish()
            } catch {
                continuation.finish(throwing: error)
            }
        }
        continuation.onTermination = { _ in task.cancel() }
        return stream
    }

    // MARK: - Calls

    private func request(_ path: String, _ body: some Encodable) throws -> HTTPClientRequest {
        var request = HTTPClientRequest(url: endpoint + path)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/json")
        request.body = .bytes(ByteBuffer(bytes: try JSONEncoder().encode(body)))
        return request
    }

    /// One POST and its JSON answer, on `client` (the calls' connections unless given); an HTTP error is etcd's
    /// message.
    private func call<Answer: Decodable>(
        _ path: String, _ body: some Encodable, on client: HTTPClient? = nil
    ) async throws -> Answer {
        let response: HTTPClientResponse
        let bytes: ByteBuffer
        do {
            response = try await (client ?? http).execute(try request(path, body), timeout: timeout, logger: logger)
            bytes = try await response.body.collect(upTo: 4 * 1024 * 1024)
        } catch {
            throw Failure(description: "etcd at \(endpoint) did not answer \(path): \(error)")
        }
        let data = Data(bytes.readableBytesView)
        guard response.status == .ok else {
            let body = try? JSONDecoder().decode(Gateway.ErrorBody.self, from: data)
            throw Failure(
                description: "etcd refused \(path): \(body?.message ?? body?.error ?? "HTTP \(response.status.code)")")
        }
        do {
            return try JSONDecoder().decode(Answer.self, from: data)
        } catch {
            throw Failure(description: "etcd's answer to \(path) is not what the gateway writes: \(error)")
        }
    }

    /// Reads a watch's lines until it breaks: its connection closes, etcd reports an error, or the revision watched
    /// from was compacted (then the caller reads again and watches from there).
    private func runWatch(
        prefix: String, after revision: Int64, into continuation: AsyncThrowingStream<[CoordinationChange], any Error>.Continuation
    ) async throws {
        let body = Gateway.WatchCreate(
            create_request: .init(
                key: Gateway.encode(prefix), range_end: Gateway.rangeEnd(of: prefix), start_revision: "\(revision + 1)"))
        // No deadline: a watch lasts; an idle one sends nothing.
        let response = try await http.execute(try request("/v3/watch", body), deadline: .distantFuture, logger: logger)
        guard response.status == .ok else {
            throw Failure(description: "etcd refused the watch: HTTP \(response.status.code)")
        }
        var line: [UInt8] = []
        for try await buffer in response.body {
            for byte in buffer.readableBytesView {
                guard byte == UInt8(ascii: "\n") else {
                    line.append(byte)
                    continue
                }
                defer { line.removeAll(keepingCapacity: true) }
                guard !line.isEmpty else { continue }
                let message = try JSONDecoder().decode(Gateway.WatchMessage.self, from: Data(line))
                if let error = message.error {
                    throw Failure(description: "etcd ended the watch: \(error.message ?? "no reason given")")
                }
                guard let result = message.result else { continue }
                if result.canceled == true {
                    throw Failure(
                        description: "etcd cancelled the watch (compacted to \(result.compact_revision ?? "?"))")
                }
                let changes = (result.events ?? []).compactMap { event -> CoordinationChange? in
                    guard let kv = event.kv else { return nil }
                    let key = Gateway.decode(kv.key)
                    if event.type == "DELETE" {
                        return .delete(key: key, revision: kv.mod_revision.flatMap(UInt64.init) ?? 0)
                    }
                    return .put(Self.entry(kv))
                }
                if !changes.isEmpty { continuation.yield(changes) }
            }
        }
    }
}
