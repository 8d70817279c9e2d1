import Foundation
import Testing
import TestSupport

#if canImport(Glibc)
import Glibc
#endif

/// hub-sim end to end, in small (scripts/hub-chaos.sh does it large): hubs on the SDK send rounds of placement,
/// source and full-configuration changes while the bridge is SIGKILLed twice and the broker restarted once. Every
/// request must complete (0 lost), no device may get a command twice for one change, and every retained state must
/// equal what its hub last sent.
@Suite(.serialized) struct HubSimTests {
    /// hub-sim's JSON summary.
    struct Summary: Decodable {
        var sent: Int
        var results: Int
        var lost: Int
        var duplicated: Int
        var retried: Int
        var errors: Int
        var p50_ms: Double
        var p99_ms: Double
        var throughput: Double
        var commands: Int
        var excess_commands: Int
        var repeated_commands: Int
        var state_mismatches: Int?
        var connections: Int
        // --head-tracking
        var frames_sent: Int?
        var frames_rendered: Int?
        var frame_p50_ms: Double?
        var frame_p99_ms: Double?
        var frame_max_ms: Double?
        var frames_outside_session: Int?
        var frames_dropped: Int?
        var head_tracking_sessions: Int?
        var sessions_on_two_hosts: Int?
        var sessions_left_active: Int?
    }

    static func run(
        _ fixture: BridgeFixture, _ arguments: [String], log: String
    ) throws -> (process: ChildProcess, output: URL) {
        let output = fixture.broker.directory.appendingPathComponent("\(log).json")
        let process = try ChildProcess(
            executable: "/bin/sh",
            arguments: ["-c", "exec \"$0\" \"$@\" > \"\(output.path)\" 2>> \"\(output.path).log\"",
                        try BuiltProducts.path("hub-sim"),
                        "--broker", "mqtt://127.0.0.1:\(fixture.broker.port)", "--json"] + arguments,
            outputPath: "/dev/null")
        return (process, output)
    }

    static func summary(_ output: URL) throws -> Summary {
        let text = try String(contentsOf: output, encoding: .utf8)
        let line = try #require(text.split(separator: "\n").last, "hub-sim wrote no summary")
        return try JSONDecoder().decode(Summary.self, from: Data(line.utf8))
    }

    /// What hub-sim's progress lines count (its stderr log, a line a second).
    enum Count: String {
        case sent, results
    }

    /// Waits until hub-sim's progress shows `count` at `mark` or more, so that faults hit a run under way. Fails at
    /// once if hub-sim ended first (its summary is written): a fault after the run would test nothing.
    static func waitForProgress(
        _ output: URL, _ count: Count, _ mark: Int, timeout: Duration = .seconds(60)
    ) async throws {
        let log = URL(fileURLWithPath: output.path + ".log")
        try await waitUntil("hub-sim at \(mark) \(count.rawValue)", timeout: timeout) {
            let text = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
            let counts = text.split(separator: "\n").compactMap { line -> Int? in
                guard let range = line.range(of: " \(count.rawValue) ") else { return nil }
                return Int(line[range.upperBound...].prefix { $0.isNumber })
            }
            if (counts.last ?? 0) >= mark { return true }
            if let summary = try? String(contentsOf: output, encoding: .utf8), !summary.isEmpty {
                throw TestFailure("hub-sim ended before \(mark) \(count.rawValue): \(text.suffix(500))")
            }
            return false
        }
    }

    /// The default scenario (placement and source changes, and devices switching between calls, media and idle on
    /// their own): a broker restart makes every hub's will say offline, then the hubs come back; within the bridge's
    /// hub offline grace nothing is released and routed again, which hub-sim would count as commands no change
    /// justifies (it did: 23–29 in the issue's run of 5 hubs × 50 accessories before the grace).
    @Test func nothingIsLostWhileTheBridgeIsKilledTwiceAndTheBrokerRestarts() async throws {
        let fixture = try await BridgeFixture(persistence: true)
        let hubs = 5
        let accessories = 10
        let rounds = 40
        // 100 requests/s: 20 s of sending. At 200/s (10 s) a loaded machine (`make test-stress`'s hogs) took 5 s to
        // bring the first killed bridge back, and the run was over before the broker's restart: the hubs had never
        // reconnected (5 connections of the 10 asked below).
        let (simulator, output) = try Self.run(fixture, [
            "--hubs", "\(hubs)", "--accessories", "\(accessories)", "--rounds", "\(rounds)", "--rate", "100",
            "--verify", "--timeout-ms", "300", "--timeout-max-ms", "1000", "--drain", "60", "--prefix", "chaos",
        ], log: "chaos")
        let total = hubs * accessories * rounds

        // The faults come at marks of what was sent, which hub-sim paces by the clock, so that each falls inside the
        // run: a mark of results can be passed between two progress lines by the burst that follows a recovery, and
        // the run end before it is seen (run 10 of a 30-run stress, at 200/s: results went from 1,467 to all 2,000
        // within a second of the broker's restart).
        try await Self.waitForProgress(output, .sent, total / 5)
        try await fixture.killBridge()
        try await Task.sleep(for: .milliseconds(300))
        try await fixture.startBridge()

        try await Self.waitForProgress(output, .sent, total / 2)
        try await fixture.broker.restart()

        try await Self.waitForProgress(output, .sent, total * 3 / 4)
        try await fixture.killBridge()
        try await Task.sleep(for: .milliseconds(300))
        try await fixture.startBridge()

        let code = try await simulator.exit()
        let summary = try Self.summary(output)
        let log = (try? String(contentsOf: URL(fileURLWithPath: output.path + ".log"), encoding: .utf8)) ?? ""
        #expect(code == 0, "hub-sim failed: \(log.suffix(2000))")
        #expect(summary.sent == total && summary.results == total, "every request completed once")
        #expect(summary.lost == 0 && summary.errors == 0)
        #expect(summary.excess_commands == 0, "a command issued twice for one change")
        #expect(summary.state_mismatches == 0, "retained states differ from what the hubs last sent: \(log.suffix(500))")
        // Seen to fail now and then under `make test-stress` (4 times in about 120 runs: 5 connections with every
        // result in, so the hubs cannot have been cut off before the end): what the broker saw goes with it.
        let brokerLog = fixture.broker.log()
        let seen = brokerLog.split(separator: "\n").filter { $0.contains("New client connected") && $0.contains(" as chaos-") }
        #expect(
            summary.connections >= 2 * hubs,
            """
            the hubs reconnected after the broker restart; the broker saw \(seen.count) hub connections, its restarts at \
            \(brokerLog.split(separator: "\n").filter { $0.contains(" running") }.map { $0.prefix(30) }); hub-sim's \
            log ends: \(log.suffix(800))
            """)
        #expect(summary.commands > 0, "the devices were commanded")
        print("hub-sim under faults: \(summary.results) results, \(summary.retried) retried, "
            + "\(summary.duplicated) duplicates, p99 \(summary.p99_ms) ms")
    }

    @Test func floodAndPacedRunsLoseNothing() async throws {
        let fixture = try await BridgeFixture()
        for rate in ["0", "200"] {
            let (simulator, output) = try Self.run(fixture, [
                "--accessories", "20", "--seconds", "2", "--rate", rate, "--scenario", "placement", "--verify",
                "--prefix", "steady\(rate)",
            ], log: "steady-\(rate)")
            let code = try await simulator.exit()
            let summary = try Self.summary(output)
            #expect(code == 0)
            #expect(summary.sent > 0 && summary.results == summary.sent && summary.lost == 0 && summary.errors == 0)
            #expect(summary.state_mismatches == 0 && summary.excess_commands == 0)
            #expect(summary.p50_ms > 0 && summary.p99_ms >= summary.p50_ms && summary.throughput > 0)
            if rate == "200" {
                // Never faster than the pace (a busy machine may make it send fewer).
                #expect(summary.sent <= 440, "paced at 200/s for 2 s: \(summary.sent)")
            }
        }
    }

    /// --slots bridge: the hubs read the bridge's layout (a single bridge's: 0 slots), and hub-sim takes it for its
    /// fence and --verify.
    @Test func aRunThatReadsTheLayoutFindsTheBridgeAndLosesNothing() async throws {
        let fixture = try await BridgeFixture()
        let (simulator, output) = try Self.run(fixture, [
            "--accessories", "5", "--seconds", "1", "--rate", "50", "--scenario", "placement", "--verify",
            "--slots", "bridge", "--prefix", "layout",
        ], log: "layout")
        let code = try await simulator.exit()
        let summary = try Self.summary(output)
        #expect(code == 0 && summary.lost == 0 && summary.errors == 0 && summary.state_mismatches == 0)
        let log = try String(contentsOf: URL(fileURLWithPath: output.path + ".log"), encoding: .utf8)
        #expect(log.contains("hub-sim: the bridge's layout: 0 slots"), "\(log)")
    }

    /// --head-tracking: every accessory registers head tracking, the devices host the sessions with their setting on,
    /// the hubs stream 100 frames a second per accessory in session while placement toggles move the sessions. Frames
    /// must be rendered, none outside its session; no session active on two hosts; none left active after a take-off.
    @Test func headTrackingFramesReachOnlyTheirSessionsHosts() async throws {
        let fixture = try await BridgeFixture()
        let (simulator, output) = try Self.run(fixture, [
            "--hubs", "2", "--accessories", "10", "--seconds", "4", "--rate", "20", "--head-tracking", "100",
            "--verify", "--prefix", "tracked",
        ], log: "head-tracking")
        let code = try await simulator.exit()
        let summary = try Self.summary(output)
        let log = (try? String(contentsOf: URL(fileURLWithPath: output.path + ".log"), encoding: .utf8)) ?? ""
        #expect(code == 0, "hub-sim failed: \(log.suffix(2000))")
        #expect(summary.lost == 0 && summary.errors == 0 && summary.state_mismatches == 0)
        #expect((summary.head_tracking_sessions ?? 0) > 0, "sessions were activated")
        #expect((summary.frames_sent ?? 0) > 0 && (summary.frames_rendered ?? 0) > 0, "\(summary)")
        #expect(summary.frames_outside_session == 0)
        #expect(summary.sessions_on_two_hosts == 0 && summary.sessions_left_active == 0)
        #expect((summary.frame_p50_ms ?? -1) >= 0 && (summary.frame_max_ms ?? -1) >= (summary.frame_p99_ms ?? 0))
        print("hub-sim --head-tracking 100: \(summary.frames_sent ?? 0) frames sent, \(summary.frames_rendered ?? 0) "
            + "rendered, p50 \(summary.frame_p50_ms ?? 0) ms, p99 \(summary.frame_p99_ms ?? 0) ms")
    }

    /// A bridge run with `--payload-format json` (for the people reading by hand) sends each hub and playing device
    /// what it reads in the format it speaks: hub-sim's hubs and devices, which read protobuf only, get their
    /// commands and session news in protobuf, and the run reads all of them.
    @Test func aJSONBridgeSendsHubsAndDevicesTheFormatTheySpeak() async throws {
        let fixture = try await BridgeFixture(bridgeArguments: ["--payload-format", "json"])
        let (simulator, output) = try Self.run(fixture, [
            "--hubs", "2", "--accessories", "10", "--seconds", "3", "--rate", "20", "--head-tracking", "100",
            "--verify", "--prefix", "protobuf",
        ], log: "json-bridge")
        let code = try await simulator.exit()
        let log = (try? String(contentsOf: URL(fileURLWithPath: output.path + ".log"), encoding: .utf8)) ?? ""
        #expect(code == 0, "\(log.suffix(2000))")
        let line = try #require(try String(contentsOf: output, encoding: .utf8).split(separator: "\n").last)
        let json = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        #expect(json["unreadable"] as? Int == 0, "\(line)")
        #expect((json["commands"] as? Int ?? 0) > 0 && (json["head_tracking_sessions"] as? Int ?? 0) > 0, "\(line)")
        #expect((json["frames_rendered"] as? Int ?? 0) > 0, "\(line)")
    }

    /// What hub-sim cannot read on its topics (a person's JSON on one of its devices' command topics), it counts,
    /// says why, and fails the run for, rather than measuring less without a word.
    @Test func aMessageHubSimCannotReadIsCountedAndFailsTheRun() async throws {
        let fixture = try await BridgeFixture()
        let (simulator, output) = try Self.run(fixture, [
            "--accessories", "4", "--devices", "8", "--scenario", "sources", "--seconds", "4", "--rate", "5",
            "--prefix", "unread",
        ], log: "unreadable")
        try await Self.waitForProgress(output, .results, 1)
        // Device 0 of hub-sim's (its addresses are 5a:11:00:00 and the device's number).
        try await fixture.broker.publish(
            topic: "audio/sources/5a1100000000/commands", message: #"{"action": "ROUTE"}"#, qos: 1,
            properties: ["-D", "publish", "content-type", "application/json"])
        let code = try await simulator.exit()
        let log = (try? String(contentsOf: URL(fileURLWithPath: output.path + ".log"), encoding: .utf8)) ?? ""
        #expect(code == 1, "\(log.suffix(2000))")
        #expect(log.contains("could not be read: hub-sim reads protobuf"), "\(log.suffix(2000))")
        let line = try #require(try String(contentsOf: output, encoding: .utf8).split(separator: "\n").last)
        let json = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        #expect(json["unreadable"] as? Int == 1, "\(line)")
    }

    @Test func anSVGChartIsDrawnFromARateSweep() async throws {
        let fixture = try await BridgeFixture()
        let chart = fixture.broker.directory.appendingPathComponent("latency.svg")
        let (simulator, output) = try Self.run(fixture, [
            "--accessories", "10", "--seconds", "1", "--sweep", "20,50,100", "--svg", chart.path, "--prefix", "sweep",
            "--scenario", "placement",
        ], log: "sweep")
        let code = try await simulator.exit()
        #expect(code == 0)
        let lines = try String(contentsOf: output, encoding: .utf8).split(separator: "\n")
        #expect(lines.count == 3, "one summary per rate")
        let svg = try String(contentsOf: chart, encoding: .utf8)
        #expect(svg.hasPrefix("<svg") && svg.contains("</svg>"))
        #expect(svg.components(separatedBy: "<polyline").count - 1 == 3, "p50, p90, p99")
        #expect(svg.components(separatedBy: "<circle").count - 1 == 9, "three rates, three percentiles")
    }

    /// Ctrl-C (or SIGTERM) ends the run early: hub-sim drains what is in flight, prints its summary and exits as a
    /// run of that length would.
    @Test func aStopSignalEndsTheRunWithItsSummary() async throws {
        let fixture = try await BridgeFixture()
        let (simulator, output) = try Self.run(fixture, [
            "--accessories", "10", "--seconds", "600", "--rate", "50", "--scenario", "placement", "--prefix", "stopped",
        ], log: "stopped")
        try await Self.waitForProgress(output, .results, 50)
        simulator.signal(SIGINT)
        #expect(try await simulator.exit(timeout: .seconds(60)) == 0)
        let summary = try Self.summary(output)
        #expect(summary.sent >= 50 && summary.results == summary.sent && summary.lost == 0, "\(summary)")
        let log = try String(contentsOf: URL(fileURLWithPath: output.path + ".log"), encoding: .utf8)
        #expect(log.contains("hub-sim: stopping"), "\(log)")
    }

    /// The wait for a mark sees the mark in the progress lines, and fails at once, not after its timeout, when the
    /// run ended before it.
    @Test func theWaitForAMarkFailsAtOnceWhenTheRunEndedBeforeIt() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("progress-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let output = directory.appendingPathComponent("run.json")
        try "hub-sim:   1.0 s  sent 200  results 70  outstanding 130  retried 38  70 results/s\n"
            .write(toFile: output.path + ".log", atomically: true, encoding: .utf8)
        try "".write(to: output, atomically: true, encoding: .utf8)
        try await Self.waitForProgress(output, .sent, 200, timeout: .seconds(5))
        try await Self.waitForProgress(output, .results, 70, timeout: .seconds(5))

        try "{\"sent\":2000}\n".write(to: output, atomically: true, encoding: .utf8)
        let started = ContinuousClock.now
        await #expect(throws: TestFailure.self) {
            try await Self.waitForProgress(output, .sent, 1500, timeout: .seconds(30))
        }
        #expect(ContinuousClock.now - started < .seconds(10), "it failed at once, not at its timeout")
    }

    @Test func badArgumentsAreRefused() async throws {
        for arguments in [
            ["--hubs", "0"], ["--rate", "-1"], ["--scenario", "chaos"], ["--broker", "tcp://x"], ["--bogus"],
            ["--head-tracking", "-1"], ["--head-tracking", "1001"],
        ] {
            let process = try ChildProcess(
                executable: try BuiltProducts.path("hub-sim"), arguments: arguments, outputPath: "/dev/null")
            #expect(try await process.exit() == 2, "\(arguments)")
        }
    }
}
