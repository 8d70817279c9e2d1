import Cluster
import Foundation
import Synchronization
import Testing
import TestSupport

#if canImport(Glibc)
import Glibc
#endif

/// Bridges as processes, members of one cluster on a real etcd and a real mosquitto, each start with a log file of its
/// own (JSON), which the tests read: who serves which slot, and when.
final class MemberProcesses: Sendable {
    /// The slot count of the tests' clusters, unless one is given.
    static let defaultSlots = 12

    /// One line of a member's JSON log about a slot.
    struct SlotEvent {
        enum Kind { case serving, stopped(reason: String) }
        var kind: Kind
        var member: String
        var slot: Int
        var epoch: UInt64
        var time: Date
    }

    let etcd: EtcdServer
    let broker: MosquittoBroker
    let cluster: String
    let slots: Int
    private let running = Mutex<[String: ChildProcess]>([:])
    private let logs = Mutex<[URL]>([])

    init(etcd: EtcdServer, broker: MosquittoBroker, cluster: String = "test", slots: Int = defaultSlots) {
        self.etcd = etcd
        self.broker = broker
        self.cluster = cluster
        self.slots = slots
    }

    deinit {
        for process in running.withLock({ Array($0.values) }) { process.signal(SIGKILL) }
    }

    /// Starts member `name`: with `homeAutomation`, its slots announce to Home Assistant (discovery on); with `slots`,
    /// another count than the cluster's; with `givesSlots` false, no `--slots` at all (the member takes the cluster's);
    /// with `softFileLimit`, under that soft limit of open descriptors (as systemd starts a service), and with
    /// `hardFileLimit` that hard one.
    func start(
        _ name: String, homeAutomation: Bool = false, slots: Int? = nil, givesSlots: Bool = true,
        softFileLimit: Int? = nil, hardFileLimit: Int? = nil
    ) throws {
        let log = broker.directory.appendingPathComponent("\(name)-\(logs.withLock { $0.count }).log")
        let bridge = try BuiltProducts.path("accessory-bridge")
        let arguments =
            [
                "--broker", "mqtt://127.0.0.1:\(broker.port)", "--cluster", etcd.endpoint, "--cluster-name", cluster,
                "--member", name, "--http-port", "0", "--log-format", "json",
            ] + (givesSlots ? ["--slots", "\(slots ?? self.slots)"] : []) + (homeAutomation ? [] : ["--no-home-automation"])
        let process =
            if softFileLimit != nil || hardFileLimit != nil {
                try ChildProcess(
                    executable: "/bin/sh",
                    arguments: [
                        "-c",
                        // The soft limit first: a hard one below it is refused.
                        ((softFileLimit ?? hardFileLimit).map { "ulimit -Sn \($0) && " } ?? "")
                            + (hardFileLimit.map { "ulimit -Hn \($0) && " } ?? "") + "exec \"$0\" \"$@\"",
                        bridge,
                    ] + arguments,
                    outputPath: log.path)
            } else {
                try ChildProcess(executable: bridge, arguments: arguments, outputPath: log.path)
            }
        running.withLock { $0[name] = process }
        logs.withLock { $0.append(log) }
    }

    func process(_ name: String) throws -> ChildProcess {
        guard let process = running.withLock({ $0[name] }) else { throw MosquittoBrokerError("\(name) is not running") }
        return process
    }

    /// SIGKILL, reaped; returns when.
    func kill(_ name: String) throws -> Date {
        let process = try process(name)
        process.signal(SIGKILL)
        let at = Date()
        _ = process.waitForExit(timeout: .seconds(5))
        running.withLock { $0[name] = nil }
        return at
    }

    /// SIGTERM: a graceful leave; waits for the exit.
    func stop(_ name: String) async throws -> Date {
        let process = try process(name)
        let at = Date()
        process.signal(SIGTERM)
        let code = try await process.exit(timeout: .seconds(20))
        running.withLock { $0[name] = nil }
        #expect(code == 0, "\(name) left with status \(code)")
        return at
    }

    /// Every slot event of every member's log so far.
    func events() -> [SlotEvent] {
        let format = ISO8601DateFormatter()
        format.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return logs.withLock { $0 }.flatMap { file -> [SlotEvent] in
            let text = (try? String(contentsOf: file, encoding: .utf8)) ?? ""
            return text.split(separator: "\n").compactMap { line in
                guard line.contains("a slot"),
                    let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                    let message = object["message"] as? String, let member = object["cluster.member"] as? String,
                    let slot = (object["slot"] as? String).flatMap(Int.init),
                    let epoch = (object["epoch"] as? String).flatMap(UInt64.init),
                    let time = (object["time"] as? String).flatMap(format.date(from:))
                else { return nil }
                switch message {
                case "serving a slot": return SlotEvent(kind: .serving, member: member, slot: slot, epoch: epoch, time: time)
                case "stopped a slot":
                    return SlotEvent(
                        kind: .stopped(reason: object["reason"] as? String ?? ""), member: member, slot: slot,
                        epoch: epoch, time: time)
                default: return nil
                }
            }
        }.sorted { $0.time < $1.time }
    }

    /// Who serves each slot now, as the logs say (a killed member's slots stay its own until another serves them).
    func owners(at time: Date = .distantFuture) -> [Int: String] {
        var owners: [Int: String] = [:]
        for event in events() where event.time <= time {
            switch event.kind {
            case .serving: owners[event.slot] = event.member
            case .stopped: if owners[event.slot] == event.member { owners[event.slot] = nil }
            }
        }
        return owners
    }

    /// Waits until every slot is served by its rendezvous owner among `members` (no takeover or handover left).
    func waitUntilServed(by members: Set<String>, timeout: Duration = .seconds(30)) async throws {
        let expected = Dictionary(
            uniqueKeysWithValues: (0..<slots).map { ($0, Rendezvous.owner(of: $0, among: members)!) })
        try await waitUntil("every slot served by its owner among \(members.sorted())", timeout: timeout) {
            owners() == expected
        }
    }

    /// How long after `time` (a member's death, pause or leave) each of `slots` was served again (by another member,
    /// or by the member started again under the same name).
    func gaps(after time: Date, slots: Set<Int>) -> [Int: TimeInterval] {
        var gaps: [Int: TimeInterval] = [:]
        for event in events() where event.time > time && slots.contains(event.slot) {
            if case .serving = event.kind, gaps[event.slot] == nil { gaps[event.slot] = event.time.timeIntervalSince(time) }
        }
        return gaps
    }

    /// Every line of every member's JSON log whose message is `message`, as an object.
    func lines(_ message: String) -> [[String: Any]] {
        logs.withLock { $0 }.flatMap { file -> [[String: Any]] in
            let text = (try? String(contentsOf: file, encoding: .utf8)) ?? ""
            return text.split(separator: "\n").compactMap { line in
                guard line.contains(message),
                    let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                    object["message"] as? String == message
                else { return nil }
                return object
            }
        }
    }

    var logText: String {
        logs.withLock { $0 }.map { (try? String(contentsOf: $0, encoding: .utf8)) ?? "" }.joined(separator: "\n")
    }
}
