import Cluster
import Etcd
import Testing
import TestSupport

/// A member started the way systemd starts a service (a soft limit of open descriptors far below the hard one)
/// serves every slot: each slot holds about 2 descriptors (4 while it starts), and 64 of them, with the process's own,
/// pass a soft limit of 128.
@Suite struct OpenFileLimitTests {
    @Test func aMemberStartedUnderALowSoftLimitServesEverySlot() async throws {
        let members = MemberProcesses(
            etcd: try await EtcdServer(), broker: try await MosquittoBroker(), cluster: "limits", slots: 64)
        try members.start("m1", softFileLimit: 128)
        try await waitUntil("every slot served", timeout: .seconds(30)) { members.owners().count == members.slots }
        #expect(!members.lines("raised the open-file limit").isEmpty)
        #expect(!members.logText.contains("Too many open files"))
        _ = try await members.stop("m1")
    }

    /// A member given no count is checked against the one the cluster recorded, once it has read it: 1,024 slots
    /// need about 2,200 descriptors, past a hard limit of 400 (which a new cluster's 64 slots would not pass).
    @Test func aMemberThatTakesTheRecordedCountIsCheckedAgainstIt() async throws {
        let etcd = try await EtcdServer()
        let members = MemberProcesses(etcd: etcd, broker: try await MosquittoBroker(), cluster: "recorded", slots: 1024)
        let client = try EtcdClient(endpoint: etcd.endpoint, logger: .init(label: "test"))
        let session = LeaseSession(lease: try await client.grantLease(ttl: .seconds(5)))
        _ = try await client.commit(
            CoordinationTransaction(
                puts: [.init(key: ClusterKeys(cluster: "recorded").layout, value: "1024", lifetime: .untilDeleted)]),
            in: session)
        await client.shutdown()
        try members.start("m1", givesSlots: false, hardFileLimit: 400)
        let message = """
            the open-file limit is below what this member needs to serve every slot: raise the hard limit \
            (LimitNOFILE= in a systemd unit, --ulimit nofile= for a container)
            """
        try await waitUntil("the limit checked against the recorded count", timeout: .seconds(30)) {
            !members.lines(message).isEmpty
        }
        let warning = try #require(members.lines(message).first)
        #expect(warning["cluster.slots"] as? String == "1024" && warning["limit"] as? String == "400")
        _ = try members.kill("m1")
    }
}
