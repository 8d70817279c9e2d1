import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A cluster of bridges as the tests of hubs that follow its layout run one: members as processes of the built
/// `accessory-bridge` on a real etcd and mosquitto, home automation off, and `accessory-bridge reshard`.
public struct BridgeClusterProcesses: Sendable {
    public let broker: MosquittoBroker
    public let etcd: EtcdServer
    public let name: String

    public init(broker: MosquittoBroker, etcd: EtcdServer, name: String) {
        self.broker = broker
        self.etcd = etcd
        self.name = name
    }

    /// What every member and reshard of the cluster is given.
    public var settings: [String] {
        [
            "--broker", "mqtt://127.0.0.1:\(broker.port)", "--cluster", etcd.endpoint, "--cluster-name", name,
            "--no-home-automation",
        ]
    }

    /// Starts member `member` with `slots` slots, its log in the broker's directory.
    public func startMember(_ member: String, slots: Int) throws -> ChildProcess {
        try ChildProcess(
            executable: try BuiltProducts.path("accessory-bridge"),
            arguments: settings + ["--slots", "\(slots)", "--member", member, "--http-port", "0"],
            outputPath: broker.directory.appendingPathComponent("\(member).log").path)
    }

    /// Runs `accessory-bridge reshard` to `count` slots; returns its exit code and what it printed.
    public func reshard(to count: Int) async throws -> (code: Int32, output: String) {
        let log = broker.directory.appendingPathComponent("reshard.log")
        let reshard = try ChildProcess(
            executable: try BuiltProducts.path("accessory-bridge"),
            arguments: ["reshard"] + settings + ["--slots", "\(count)"], outputPath: log.path)
        let code = try await reshard.exit(timeout: .seconds(60))
        return (code, (try? String(contentsOf: log, encoding: .utf8)) ?? "")
    }

    /// Stops `member` and etcd, awaiting each: a deinit would block a thread of the test pool meanwhile.
    public func end(_ member: ChildProcess) async {
        member.signal(SIGKILL)
        _ = try? await member.exit(timeout: .seconds(20))
        await etcd.stop()
    }
}
