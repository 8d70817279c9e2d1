@testable import AccessoryWire
import Foundation
import Testing
import TestSupport

#if canImport(Glibc)
import Glibc
#endif

/// What a newcomer meets starting and stopping the tools, each through the real executable: a broker that is not
/// running, a wrong password, a TLS file that is not there, a port already taken, and Ctrl-C (SIGINT) or a
/// supervisor's SIGTERM at each phase of start-up. Each failure ends with one actionable line and status 1; each stop
/// ends cleanly with status 0, with what was printed kept.
@Suite struct StartAndStopTests {
    /// A process run to its end: its exit status, and what it printed (standard output and error together).
    struct Ended {
        var status: Int32
        var output: String

        /// The last line: the one that says why it ended.
        var lastLine: String { output.split(separator: "\n").last.map(String.init) ?? "" }

        /// Nothing in the output says it crashed.
        var crashed: Bool {
            ["Fatal error", "Assertion failed", "crashed", "Backtrace"].contains { output.contains($0) }
        }
    }

    /// Runs `product` with `arguments` to its end; kills it and throws after `timeout`.
    static func run(_ product: String, _ arguments: [String], in directory: URL, timeout: Duration = .seconds(30))
        async throws -> Ended
    {
        let log = directory.appendingPathComponent("\(product)-\(UUID().uuidString.prefix(8)).log")
        let process = try ChildProcess(executable: try BuiltProducts.path(product), arguments: arguments, outputPath: log.path)
        let status = try await process.exit(timeout: timeout)
        return Ended(status: status, output: (try? String(contentsOf: log, encoding: .utf8)) ?? "")
    }

    static func temporaryDirectory() throws -> URL {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("start-stop-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        return directory
    }

    // MARK: accessoryctl

    /// Every subcommand's `--help` (and the bridge's) shows each default as one would type it: an argument type that
    /// does not say how it is written shows its Swift value instead (`CapabilitiesArgument(capabilities: […])`).
    @Test func everyHelpShowsItsDefaultsAsTheyAreTyped() async throws {
        let directory = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let overview = try await Self.run("accessoryctl", ["--help"], in: directory)
        #expect(overview.status == 0)
        // The SUBCOMMANDS section: a name at the start of each entry, indented by two spaces.
        let subcommands = overview.output.components(separatedBy: "SUBCOMMANDS:").last?
            .split(separator: "\n")
            .filter { $0.hasPrefix("  ") && !$0.hasPrefix("   ") }
            .compactMap { $0.split(separator: " ").first.map(String.init) }
            .filter { $0 != "See" } ?? []
        #expect(subcommands.count >= 15, "\(overview.output)")
        var helps = [(name: "accessory-bridge", output: try await Self.run("accessory-bridge", ["--help"], in: directory).output)]
        for subcommand in subcommands {
            helps.append(("accessoryctl \(subcommand)", try await Self.run("accessoryctl", [subcommand, "--help"], in: directory).output))
        }
        for help in helps {
            // ArgumentParser wraps a long default over lines: read the text as one line.
            let text = help.output.split(whereSeparator: \.isWhitespace).joined(separator: " ")
            let defaults = text.components(separatedBy: "(default: ").dropFirst()
                .map { $0.prefix { $0 != ")" } }
            for value in defaults {
                #expect(!value.contains("("), "\(help.name) shows a default as a Swift value: \(value)")
            }
        }
    }

    /// Its output goes out line by line into a file (or a pipe), and a stop signal ends it with status 0 and what
    /// it printed kept, as mosquitto_sub does.
    @Test(arguments: [SIGINT, SIGTERM])
    func accessoryctlPrintsAsItGoesAndAStopKeepsIt(signal: Int32) async throws {
        let broker = try await MosquittoBroker()
        let bridge = try await BridgeIntegrationTests.startBridge(on: broker)
        let hub = try await Peer("hub", broker: broker, subscribe: ["audio/hubs/#"])
        try await BridgeIntegrationTests.setUpHeadphones(hub)
        #expect(try await hub.request(.placement(.onHead), sequence: 4).error == .none)

        let log = broker.directory.appendingPathComponent("phone.log")
        let phone = try ChildProcess(
            executable: try BuiltProducts.path("accessoryctl"),
            arguments: ["source", "12:34:56:78:9A:BC", "--activity", "media", "--broker", "mqtt://127.0.0.1:\(broker.port)"],
            outputPath: log.path)
        func printed() -> String { (try? String(contentsOf: log, encoding: .utf8)) ?? "" }
        // While it runs: its own line, then the command the bridge sends it.
        try await waitUntil("the phone's first line") { printed().contains("source  12:34:56:78:9A:BC media") }
        try await waitUntil("the phone's command") { printed().contains("command ROUTE_TO_ACCESSORY 12:34:56:78:9A:BC") }
        phone.signal(signal)
        #expect(try await phone.exit(timeout: .seconds(10)) == 0)
        let lines = printed().split(separator: "\n")
        #expect(lines.count == 2, "\(lines)")
        #expect(lines.last?.contains("(SOURCE_ACTIVATED)") == true, "\(lines)")
        await hub.close()
        try await bridge.stop()
    }

    @Test func accessoryctlSaysWhyItCannotConnect() async throws {
        let directory = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let nobody = try MosquittoBroker.freePort()

        // No broker there: it gives up after --timeout, naming the address and why.
        var ended = try await Self.run(
            "accessoryctl", ["pair", "headphones", "--broker", "mqtt://127.0.0.1:\(nobody)", "--timeout", "1"],
            in: directory)
        #expect(ended.status == 1)
        #expect(ended.output == "error: no connection to 127.0.0.1:\(nobody) within 1.0 seconds: Connection refused "
            + "(nothing listens there: is the broker running, on that port?)\n", "\(ended.output)")

        // The watch waits no longer.
        ended = try await Self.run(
            "accessoryctl", ["watch", "--broker", "mqtt://127.0.0.1:\(nobody)", "--timeout", "1"], in: directory)
        #expect(ended.status == 1 && ended.lastLine.hasPrefix("error: no connection to 127.0.0.1:\(nobody)"), "\(ended.output)")

        // A TLS file that is not there: named before anything connects.
        ended = try await Self.run(
            "accessoryctl",
            ["state", "headphones", "--broker", "mqtts://127.0.0.1:\(nobody)", "--ca-file", "\(directory.path)/ca.crt"],
            in: directory)
        #expect(ended.status == 1)
        #expect(ended.output == "error: the CA file \(directory.path)/ca.crt cannot be read: No such file or directory\n",
            "\(ended.output)")

        // A wrong password: at once, not after the timeout.
        let broker = try await MosquittoBroker(users: ["hub-1": "right"])
        let started = ContinuousClock.now
        ended = try await Self.run(
            "accessoryctl",
            ["place", "headphones", "onHead", "--broker", "mqtt://127.0.0.1:\(broker.port)", "--username", "hub-1",
             "--password", "wrong", "--timeout", "60"],
            in: directory)
        // Far below the timeout: sitting it out would take a minute. (With --timeout 20 and 15 s here, a run of
        // `make test-stress` took 15.3 s: two CPU hogs and the rest of the suite on two cores.)
        #expect(ContinuousClock.now - started < .seconds(40), "refused credentials end the wait")
        #expect(ended.status == 1)
        #expect(ended.output.split(separator: "\n").count == 1, "\(ended.output)")
        #expect(ended.lastLine.hasPrefix("error: cannot connect to mqtt://127.0.0.1:\(broker.port): "), "\(ended.output)")
        #expect(ended.lastLine.contains("the user name or password is wrong"), "\(ended.output)")
        #expect(ended.lastLine.contains("ACCESSORYCTL_PASSWORD"), "\(ended.output)")
        #expect(!ended.crashed)
    }

    // MARK: The bridge

    /// A second bridge on the machine: the port of /metrics and /health is taken. It says so, naming the address and
    /// the options, before it connects to the broker.
    @Test func theBridgeSaysWhichPortIsTakenBeforeConnecting() async throws {
        let broker = try await MosquittoBroker()
        let taken = try ListeningSocket()
        let offset = broker.logLength
        let ended = try await Self.run(
            "accessory-bridge",
            ["--broker", "mqtt://127.0.0.1:\(broker.port)", "--http-port", "\(taken.port)", "--client-id", "second"],
            in: broker.directory)
        #expect(ended.status == 1)
        #expect(ended.output == "Error: cannot serve /metrics and /health on 127.0.0.1:\(taken.port): Address already in "
            + "use (another bridge?): choose another port with --http-port (0: any free one), or turn the endpoint off "
            + "with --no-http\n", "\(ended.output)")
        // Nothing connected: the broker's log has no client of it since.
        let log = String(broker.log().utf8.dropFirst(offset)) ?? ""
        #expect(!log.contains("second"), "\(log)")
    }

    @Test func theBridgeSaysWhyTheBrokerRefusesIt() async throws {
        let broker = try await MosquittoBroker(users: ["bridge.audio": "right"])
        let started = ContinuousClock.now
        var ended = try await Self.run(
            "accessory-bridge",
            ["--broker", "mqtt://127.0.0.1:\(broker.port)", "--http-port", "0", "--username", "bridge.audio"],
            in: broker.directory)
        #expect(ContinuousClock.now - started < .seconds(20), "refused credentials end the start-up")
        #expect(ended.status == 1 && !ended.crashed, "\(ended.output)")
        #expect(ended.lastLine.hasPrefix("Error: cannot connect to the broker at mqtt://127.0.0.1:\(broker.port): "),
            "\(ended.output)")
        #expect(ended.lastLine.contains("the user name or password is wrong"), "\(ended.output)")
        #expect(ended.lastLine.contains("AUDIO_BRIDGE_PASSWORD"), "\(ended.output)")
        // The other services were shut down gracefully, not cancelled: no error of theirs around the bridge's line
        // (cancelled, Hummingbird logged "Waiting on child channel: CancellationError()" every time, and at times
        // "Server shutdown error: Already closed" after the bridge's line).
        let errors = ended.output.split(separator: "\n").filter { $0.contains(" error ") }
        #expect(errors.isEmpty, "\(ended.output)")

        ended = try await Self.run(
            "accessory-bridge",
            ["--broker", "mqtts://127.0.0.1:\(broker.port)", "--http-port", "0", "--ca-file", "/nonexistent/ca.crt"],
            in: broker.directory)
        #expect(ended.status == 1)
        #expect(ended.output == "Error: the CA file /nonexistent/ca.crt cannot be read: No such file or directory\n",
            "\(ended.output)")
    }

    /// The phases of start-up at which a stop can come.
    enum Phase: String, CaseIterable, CustomTestStringConvertible {
        /// Nothing listens on the broker's port: the bridge retries.
        case brokerDown
        /// The broker accepts the TCP connection but says nothing (it is stopped): the bridge waits for its CONNACK.
        case brokerSilent
        /// Connected, reading the retained states: the broker's ACL keeps the marker that ends the read from coming
        /// back, so the read goes on (until the bridge's 60-second limit).
        case readingRetainedStates
        /// Serving.
        case serving

        var testDescription: String { rawValue }
    }

    @Test(arguments: Phase.allCases, [SIGINT, SIGTERM])
    func aStopAtEachPhaseOfStartUpEndsCleanly(phase: Phase, signal: Int32) async throws {
        // Everything but the rebuild marker, for anonymous clients (the lines before any `user` line).
        let acl = FileManager.default.temporaryDirectory.appendingPathComponent("acl-\(UUID().uuidString)")
        try "topic readwrite audio/hubs/#\ntopic readwrite audio/accessories/#\ntopic readwrite audio/sources/#\n"
            .appending("topic readwrite audio/bridge/status\ntopic readwrite audio/bridge/availability\n")
            .write(to: acl, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: acl) }
        let broker = try await MosquittoBroker(extraConfig: phase == .readingRetainedStates ? "acl_file \(acl.path)" : "")
        let port = phase == .brokerDown ? try MosquittoBroker.freePort() : broker.port
        let clientID = "stopped-\(phase.rawValue)"
        if phase == .brokerSilent { try await broker.pause() }
        let offset = broker.logLength
        let log = broker.directory.appendingPathComponent("\(clientID).log")
        let bridge = try ChildProcess(
            executable: try BuiltProducts.path("accessory-bridge"),
            arguments: ["--broker", "mqtt://127.0.0.1:\(port)", "--http-port", "0", "--client-id", clientID],
            outputPath: log.path)
        func output() -> String { (try? String(contentsOf: log, encoding: .utf8)) ?? "" }
        switch phase {
        case .brokerDown:
            try await waitUntil("a failed attempt") { output().contains("MQTT connect failed; retrying") }
        case .brokerSilent:
            // The TCP connection is in the broker's backlog; the bridge's start-up waits for the broker's answer.
            try await waitUntil("the bridge starting") { output().contains("starting") }
        case .readingRetainedStates:
            try await broker.waitForLog("\(clientID)-rebuild 0 audio/accessories/+/state", after: offset, timeout: .seconds(30))
        case .serving:
            try await broker.waitForLog("\(clientID) 1 audio/hubs/+/accessories/+/telemetry", after: offset, timeout: .seconds(30))
        }
        bridge.signal(signal)
        let status = try await bridge.exit(timeout: .seconds(30))
        if phase == .brokerSilent { try await broker.resume() }
        #expect(status == 0, "\(output())")
        let text = output()
        #expect(!["Fatal error", "Assertion failed", "crashed", "Error:"].contains { text.contains($0) }, "\(text)")
        #expect(text.contains(phase == .serving ? "shutting down" : "stopped before start-up finished"), "\(text)")
    }
}

/// A TCP socket listening on a free loopback port, closed when released.
final class ListeningSocket: Sendable {
    let port: Int
    private let descriptor: Int32

    init() throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let listening = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                bind(fd, pointer, length) == 0 && getsockname(fd, pointer, &length) == 0 && listen(fd, 4) == 0
            }
        }
        guard fd >= 0, listening else {
            close(fd)
            throw MosquittoBrokerError("cannot listen on a loopback port: errno \(errno)")
        }
        descriptor = fd
        port = Int(UInt16(bigEndian: address.sin_port))
    }

    deinit {
        close(descriptor)
    }
}
