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
}
