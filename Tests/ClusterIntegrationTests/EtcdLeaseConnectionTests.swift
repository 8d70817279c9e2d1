import Cluster
import Etcd
import Logging
import Testing
import TestSupport

/// A member's lease lives on keep-alives: one that waited behind the member's other etcd calls for a connection would
/// let the lease lapse while etcd answers, and every slot of the member would stop. On a real etcd: every connection
/// the calls share is held by a watch, and the keep-alive is answered still.
@Suite(.serialized) struct EtcdLeaseConnectionTests {
    @Test func aKeepAliveIsAnsweredWhileEveryConnectionOfTheOtherCallsIsHeld() async throws {
        let etcd = try await EtcdServer()
        var logger = Logger(label: "test")
        logger.logLevel = .warning
        let member = try EtcdClient(endpoint: etcd.endpoint, timeout: .seconds(2), logger: logger)
        let writer = try EtcdClient(endpoint: etcd.endpoint, logger: logger)
        // Let go of on every path: an HTTP client released without its shutdown stops the test process.
        do {
            let lease = try await member.grantLease(ttl: .seconds(30))
            let writing = LeaseSession(lease: try await writer.grantLease(ttl: .seconds(30)))

            // As many watches as the calls have connections, each holding one: a watch is established once it has
            // delivered a change (it watches from the first revision, so a change made before it began counts).
            let watches = (0..<EtcdClient.callConnections).map { _ in member.watch(prefix: "/held/", after: 0) }
            try await writer.put("/held/key", value: "1", in: writing)
            try await withThrowingTaskGroup(of: Void.self) { group in
                for watch in watches {
                    group.addTask {
                        var changes = watch.makeAsyncIterator()
                        _ = try await changes.next()
                    }
                }
                group.addTask {
                    try await Task.sleep(for: .seconds(20))
                    throw WaitTimeout("timed out after 20 s waiting for \(watches.count) watches to be established")
                }
                // The watches, then the timer cancelled.
                for _ in watches.indices { try await group.next() }
                group.cancelAll()
            }

            // The calls' connections are all held: another call waits for one until its deadline and fails.
            await #expect(throws: EtcdClient.Failure.self) {
                _ = try await member.get("/held/key", in: LeaseSession(lease: lease))
            }
            // The lease's are its own.
            #expect(try await member.keepAlive(lease))
            try await member.revoke(lease)
            #expect(try await !member.keepAlive(lease))
        } catch {
            await member.shutdown()
            await writer.shutdown()
            throw error
        }
        await member.shutdown()
        await writer.shutdown()
    }
}
