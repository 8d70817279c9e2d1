import Foundation
import Testing
import TestSupport

#if canImport(Glibc)
import Glibc
#endif

/// The cluster's first member records its slot count in etcd; a member started with another leaves at once, with an
/// error that names both, and the members that serve are not disturbed.
@Suite struct SlotCountTests {
    @Test func aMemberGivenAnotherSlotCountRefusesToJoinAndTheOthersServeOn() async throws {
        let etcd = try await EtcdServer()
        let broker = try await MosquittoBroker()
        func member(_ name: String, slots: Int) throws -> (ChildProcess, URL) {
            let log = broker.directory.appendingPathComponent("\(name).log")
            let process = try ChildProcess(
                executable: try BuiltProducts.path("accessory-bridge"),
                arguments: [
                    "--broker", "mqtt://127.0.0.1:\(broker.port)", "--cluster", etcd.endpoint, "--cluster-name", "count",
                    "--slots", "\(slots)", "--member", name, "--http-port", "0", "--log-format", "json",
                    "--no-home-automation",
                ],
                outputPath: log.path)
            return (process, log)
        }
        let text = { (log: URL) in (try? String(contentsOf: log, encoding: .utf8)) ?? "" }
        let (first, firstLog) = try member("m1", slots: 12)
        defer { first.signal(SIGKILL) }
        try await waitUntil("m1 serves its 12 slots", timeout: .seconds(30)) {
            text(firstLog).components(separatedBy: "\"serving a slot\"").count - 1 == 12
        }

        let (second, secondLog) = try member("m2", slots: 16)
        defer { second.signal(SIGKILL) }
        let code = try await second.exit(timeout: .seconds(20))
        #expect(code != 0)
        #expect(text(secondLog).contains("this cluster was created with 12 slots, and this member was given 16"))
        #expect(!text(secondLog).contains("\"claimed a slot\""))
        // m1 never saw it join, and gave nothing up.
        #expect(!text(firstLog).contains("\"a member joined\""))
        #expect(!text(firstLog).contains("\"stopped a slot\""))
        first.signal(SIGTERM)
        #expect(try await first.exit(timeout: .seconds(20)) == 0)
    }
}
