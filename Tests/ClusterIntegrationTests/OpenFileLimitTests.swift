import Foundation
import Testing
import TestSupport

#if canImport(Glibc)
import Glibc
#endif

/// A member started the way systemd starts a service (a soft limit of open descriptors far below the hard one)
/// serves every slot: each slot holds about 6 descriptors, and 64 of them pass a soft limit of 256.
@Suite struct OpenFileLimitTests {
    @Test func aMemberStartedUnderALowSoftLimitServesEverySlot() async throws {
        let etcd = try await EtcdServer()
        let broker = try await MosquittoBroker()
        let log = broker.directory.appendingPathComponent("member.log")
        let slots = 64
        let member = try ChildProcess(
            executable: "/bin/sh",
            arguments: [
                "-c", "ulimit -Sn 256 && exec \"$0\" \"$@\"", try BuiltProducts.path("accessory-bridge"),
                "--broker", "mqtt://127.0.0.1:\(broker.port)", "--cluster", etcd.endpoint, "--cluster-name", "limits",
                "--slots", "\(slots)", "--member", "m1", "--http-port", "0", "--log-format", "json", "--no-home-automation",
            ],
            outputPath: log.path)
        defer { member.signal(SIGKILL) }
        let text = { (try? String(contentsOf: log, encoding: .utf8)) ?? "" }
        let served = {
            Set(text().split(separator: "\n").filter { $0.contains("\"serving a slot\"") }.compactMap { line in
                line.firstRange(of: "\"slot\":\"").map { line[$0.upperBound...].prefix { $0 != "\"" } }.flatMap { Int($0) }
            })
        }
        try await waitUntil("every slot served", timeout: .seconds(30)) { served().count == slots }
        #expect(text().contains("\"raised the open-file limit\""))
        #expect(!text().contains("Too many open files"))
        member.signal(SIGTERM)
        #expect(try await member.exit(timeout: .seconds(20)) == 0)
    }
}
