import Foundation
import Logging
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Why a ``MosquittoBroker`` or one of its client tools failed.
public struct MosquittoBrokerError: Error, CustomStringConvertible {
    public var description: String

    public init(_ description: String) {
        self.description = description
    }
}

/// A real `mosquitto` broker for integration tests, on a free loopback port, with its configuration, log and
/// persistence in a temporary directory of its own.
///
/// It fails — never skips — when mosquitto is not installed: `make test` installs it. It stops when released.
///
/// ```swift
/// let broker = try await MosquittoBroker()
/// try await broker.publish(topic: "a/b", message: "hello")
/// ```
public final class MosquittoBroker: Sendable {
    /// The loopback address the broker listens on.
    public let host = "127.0.0.1"
    /// The port it listens on; the same after ``restart()``.
    public let port: Int
    /// Holds `mosquitto.conf`, `mosquitto.log`, the password file and the persistence database.
    public let directory: URL
    /// The broker's log (connections, subscriptions, errors), all runs appended.
    public let logFile: URL

    private let configFile: URL
    private let executable: String
    private let logger: Logger
    /// The running broker (its ChildProcess watchdog kills it should this process die without stopping it).
    private let process = Mutex<ChildProcess?>(nil)

    /// Starts mosquitto and waits until its port accepts connections.
    ///
    /// - Parameters:
    ///   - persistence: Keep retained messages and sessions across ``restart()`` (`persistence true`, the database
    ///     in ``directory``; mosquitto writes it when stopped with ``stop()``, not after ``kill()``).
    ///   - users: When not empty, anonymous clients are refused and these name → password pairs are the only
    ///     accepted credentials (a password file written with `mosquitto_passwd -b`).
    ///   - extraConfig: Appended to the generated configuration, after the listener line (so listener options
    ///     such as `cafile` apply to it): ACLs, TLS, limits.
    public init(
        persistence: Bool = false,
        users: [String: String] = [:],
        extraConfig: String = "",
        logger: Logger = Logger(label: "MosquittoBroker")
    ) async throws {
        StallWatch.start()
        self.logger = logger
        executable = try Self.findTool("mosquitto", package: "mosquitto")
        directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("mosquitto-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        configFile = directory.appendingPathComponent("mosquitto.conf")
        logFile = directory.appendingPathComponent("mosquitto.log")
        _ = FileManager.default.createFile(atPath: logFile.path, contents: nil)

        var passwordFile: URL?
        if !users.isEmpty {
            let file = directory.appendingPathComponent("passwords")
            let passwd = try Self.findTool("mosquitto_passwd", package: "mosquitto")
            _ = FileManager.default.createFile(atPath: file.path, contents: nil)
            for (name, password) in users.sorted(by: { $0.key < $1.key }) {
                try await Self.run(passwd, ["-b", file.path, name, password], outputIn: directory)
            }
            passwordFile = file
        }

        // By value: `self` is not whole until `port` is set.
        let (executable, directory, configFile, logFile) = (executable, directory, configFile, logFile)
        let (candidate, launched) = try await Self.onFreePorts(1, for: "mosquitto") { ports in
            try Self.configuration(
                port: ports[0], directory: directory, persistence: persistence, passwordFile: passwordFile,
                extraConfig: extraConfig
            ).write(to: configFile, atomically: true, encoding: .utf8)
            let launched = try await Self.launch(
                executable: executable, configFile: configFile, logFile: logFile, port: ports[0])
            return (ports[0], launched)
        }
        port = candidate
        process.withLock { $0 = launched }
        logger.debug("mosquitto started", metadata: ["port": "\(candidate)", "directory": "\(directory.path)"])
    }

    /// Starts a server with `start` on `count` ports ``freePort()`` hands out, and again on others (5 attempts in
    /// all) while it fails because another process bound one of them between that probe and the server's own bind
    /// ("address already in use", as mosquitto and etcd say it). `start` cleans up after its own failure.
    public static func onFreePorts<Started>(
        _ count: Int, for server: String, _ start: ([Int]) async throws -> Started
    ) async throws -> Started {
        var lastFailure = ""
        for _ in 0..<5 {
            var ports: [Int] = []
            for _ in 0..<count { ports.append(try freePort()) }
            do {
                return try await start(ports)
            } catch let error as MosquittoBrokerError
                where error.description.localizedCaseInsensitiveContains("address already in use")
            {
                lastFailure = error.description
            }
        }
        throw MosquittoBrokerError("\(server) could not bind \(count) free port(s) after 5 attempts: \(lastFailure)")
    }

    deinit {
        // KEEP_BROKER_FILES=1 keeps the configuration and the logs (the broker's, and the bridge's of tests that put
        // them here) for a look after a failure.
        let directory = directory
        let removeFiles: @Sendable () -> Void = {
            if ProcessInfo.processInfo.environment["KEEP_BROKER_FILES"] == nil {
                try? FileManager.default.removeItem(at: directory)
            }
        }
        // Stopped as stop() does, but waited for on ProcessReaper's thread: a deinit must not hold a thread of the
        // cooperative pool for the seconds mosquitto may take.
        if let running = (process.withLock { process in defer { process = nil }; return process }) {
            ProcessReaper.end(running, signal: SIGTERM, grace: .seconds(5), then: removeFiles)
        } else {
            removeFiles()
        }
    }

    /// Stops the broker gracefully (SIGTERM, then waits without blocking a thread; SIGKILL after 5 s). Does nothing
    /// when it is not running.
    public func stop() async {
        guard let running = (process.withLock { process in defer { process = nil }; return process }) else { return }
        running.signal(SIGTERM)
        // On timeout, exit(timeout:) kills it; end reaps it.
        if (try? await running.exit(timeout: .seconds(5))) == nil { Self.end(running) }
    }

    /// Kills the broker with SIGKILL: no goodbye to clients, nothing persisted.
    public func kill() {
        process.withLock { process in
            guard let running = process else { return }
            process = nil
            Self.end(running)
        }
    }

    /// Sends `signal` to the broker: SIGSTOP freezes it (connections stay open, nothing is read or answered), SIGCONT
    /// lets it go on.
    public func signal(_ signal: Int32) {
        process.withLock { $0?.signal(signal) }
    }

    /// Freezes the broker (SIGSTOP): its connections stay open, nothing is read or answered, and a new TCP connection
    /// is accepted by the kernel and then hears nothing. Returns once the kernel says it is stopped.
    public func pause() async throws {
        let process = try running()
        process.signal(SIGSTOP)
        try await waitUntil("mosquitto stopped") { process.isStopped }
    }

    /// Lets a paused broker go on (SIGCONT); returns once it runs.
    public func resume() async throws {
        let process = try running()
        process.signal(SIGCONT)
        try await waitUntil("mosquitto going on") { !process.isStopped }
    }

    private func running() throws -> ChildProcess {
        guard let process = process.withLock({ $0 }) else { throw MosquittoBrokerError("mosquitto is not running") }
        return process
    }

    /// Stops the broker if it runs and starts it again on the same port, with the same persistence directory.
    public func restart() async throws {
        await stop()
        let launched = try await Self.launch(executable: executable, configFile: configFile, logFile: logFile, port: port)
        process.withLock { $0 = launched }
        logger.debug("mosquitto restarted", metadata: ["port": "\(port)"])
    }

    /// Whether the broker process runs.
    public var isRunning: Bool {
        process.withLock { $0?.isRunning ?? false }
    }

    // MARK: The broker's log

    /// The broker's log so far.
    public func log() -> String {
        (try? String(contentsOf: logFile, encoding: .utf8)) ?? ""
    }

    /// The log's length in bytes: pass it to ``waitForLog(_:after:timeout:)`` to look only at what comes next.
    public var logLength: Int {
        ((try? FileManager.default.attributesOfItem(atPath: logFile.path)[.size]) as? Int) ?? 0
    }

    /// Waits until the log, from byte `offset` on, contains `text` (such as `"New client connected"` or
    /// `"Client x disconnected"`); throws after `timeout`.
    public func waitForLog(_ text: String, after offset: Int = 0, timeout: Duration = .seconds(5)) async throws {
        let deadline = ContinuousClock.now + timeout
        while true {
            let data = (try? Data(contentsOf: logFile)) ?? Data()
            if data.count > offset, String(decoding: data.dropFirst(offset), as: UTF8.self).contains(text) { return }
            guard ContinuousClock.now < deadline else {
                throw MosquittoBrokerError("mosquitto's log did not show \"\(text)\" within \(timeout):\n\(log())")
            }
            try await Task.sleep(for: .milliseconds(20))
        }
    }

    // MARK: The real mosquitto_pub and mosquitto_sub

    /// Publishes one message with `mosquitto_pub -V mqttv5` (or the `version` given: `mqttv311` is what Home
    /// Assistant speaks by default).
    ///
    /// - Parameter properties: More `mosquitto_pub` arguments, such as
    ///   `["-D", "publish", "user-property", "name", "value"]`.
    public func publish(
        topic: String, message: String, qos: Int = 0, retain: Bool = false, version: String = "mqttv5",
        properties: [String] = []
    ) async throws {
        let tool = try Self.findTool("mosquitto_pub", package: "mosquitto-clients")
        var arguments = [
            "-h", host, "-p", "\(port)", "-V", version, "-i", "pub-\(UUID().uuidString.prefix(8))",
            "-t", topic, "-m", message, "-q", "\(qos)",
        ]
        if retain { arguments.append("-r") }
        try await run(tool, arguments + properties)
    }

    /// Publishes `payload`, any bytes (protobuf, say), with `mosquitto_pub -f`.
    public func publish(topic: String, payload: [UInt8], qos: Int = 1) async throws {
        let file = directory.appendingPathComponent("payload-\(UUID().uuidString)")
        guard FileManager.default.createFile(atPath: file.path, contents: Data(payload)) else {
            throw MosquittoBrokerError("cannot write \(file.path)")
        }
        defer { try? FileManager.default.removeItem(at: file) }
        let tool = try Self.findTool("mosquitto_pub", package: "mosquitto-clients")
        try await run(tool, [
            "-h", host, "-p", "\(port)", "-V", "mqttv5", "-i", "pub-\(UUID().uuidString.prefix(8))", "-t", topic,
            "-f", file.path, "-q", "\(qos)",
        ])
    }

    /// Receives `count` messages with `mosquitto_sub -V mqttv5 -v` and returns them as `"topic payload"` lines;
    /// throws when fewer arrive within `timeout`.
    ///
    /// It returns when done, so it suits messages that are already there (retained) or published meanwhile by
    /// another task; to publish only once the subscription is in place, use
    /// ``startSubscriber(topic:count:timeout:qos:clientID:arguments:)``.
    public func subscribe(topic: String, count: Int, timeout: Duration = .seconds(5)) async throws -> [String] {
        try await startSubscriber(topic: topic, count: count, timeout: timeout, waitForSubscription: false).output()
    }

    /// Starts `mosquitto_sub -V mqttv5 -v` and returns once the broker has registered its subscription (seen in the
    /// broker's log).
    ///
    /// - Parameters:
    ///   - count: `-C`: it exits after this many messages.
    ///   - timeout: `-W`: it fails when they have not arrived by then.
    ///   - arguments: More `mosquitto_sub` arguments, such as `["--will-topic", "t", "--will-payload", "gone"]`.
    ///   - clientID: `-i`; a fresh one by default.
    public func startSubscriber(
        topic: String, count: Int, timeout: Duration = .seconds(5), qos: Int = 0, clientID: String? = nil,
        arguments: [String] = []
    ) async throws -> MosquittoClientProcess {
        try await startSubscriber(
            topic: topic, count: count, timeout: timeout, qos: qos, clientID: clientID, arguments: arguments,
            waitForSubscription: true
        )
    }

    private func startSubscriber(
        topic: String, count: Int, timeout: Duration, qos: Int = 0, clientID: String? = nil, arguments: [String] = [],
        waitForSubscription: Bool
    ) async throws -> MosquittoClientProcess {
        let tool = try Self.findTool("mosquitto_sub", package: "mosquitto-clients")
        let clientID = clientID ?? "sub-\(UUID().uuidString.prefix(8))"
        let seconds = max(1, Int((timeout + .milliseconds(999)).components.seconds))
        let logOffset = logLength
        let client = try MosquittoClientProcess(
            executable: tool,
            arguments: [
                "-h", host, "-p", "\(port)", "-V", "mqttv5", "-i", clientID, "-t", topic, "-q", "\(qos)", "-v",
                "-C", "\(count)", "-W", "\(seconds)",
            ] + arguments,
            clientID: clientID,
            directory: directory
        )
        if waitForSubscription {
            // mosquitto logs each subscription as "<client id> <qos> <filter>".
            try await waitForLog("\(clientID) \(qos) \(topic)", after: logOffset)
        }
        return client
    }

    // MARK: Helpers

    /// Finds a command on `PATH` or in the sbin directories, where Debian puts `mosquitto`.
    public static func findTool(_ name: String, package: String) throws -> String {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? ""
        let directories = path.split(separator: ":").map(String.init) + ["/usr/sbin", "/usr/local/sbin", "/sbin"]
        for directory in directories {
            let candidate = (directory as NSString).appendingPathComponent(name)
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        }
        throw MosquittoBrokerError(
            "\(name) is not installed (looked on PATH and in /usr/sbin): the integration tests need a real mosquitto. "
                + "Run `make test`, which installs the Debian packages mosquitto and mosquitto-clients."
        )
    }

    private static func configuration(
        port: Int, directory: URL, persistence: Bool, passwordFile: URL?, extraConfig: String
    ) -> String {
        var lines = [
            "listener \(port) 127.0.0.1",
            "allow_anonymous \(passwordFile == nil)",
            "persistence \(persistence)",
            "persistence_location \(directory.path)/",
            "log_dest stderr",
            "log_type error",
            "log_type warning",
            "log_type notice",
            "log_type information",
            "log_type subscribe",
            "log_type unsubscribe",
            "connection_messages true",
            // mosquitto's default (1,000 queued per client) drops QoS 1 messages for a subscriber that falls behind,
            // which a loaded test machine makes happen; a test that wants a limit sets one in `extraConfig`.
            "max_queued_messages 1000000",
        ]
        if let passwordFile { lines.append("password_file \(passwordFile.path)") }
        // As root, mosquitto would switch to the `mosquitto` user, who cannot read this directory.
        if geteuid() == 0 { lines.append("user root") }
        return (lines + [extraConfig]).joined(separator: "\n") + "\n"
    }

    /// Loopback ports ``freePort()`` handed out in this process.
    private static let handedOut = Mutex<Set<Int>>([])

    /// A loopback port nothing is bound to, handed out once per process, and outside the kernel's ephemeral range.
    ///
    /// Once: a test that stops its broker and starts it again later (a broker down at first) keeps the port to
    /// itself meanwhile. Bound to port 0 instead, the kernel could give that free port to another test's broker,
    /// whose clients then met the wrong broker (it happened once in nine runs of `make test-stress` under two hogs:
    /// a client that was to find nothing listening connected to another test's broker, and that test's client to
    /// this one's). Outside the ephemeral range: no connection takes it as its local port either, which would make
    /// the broker's restart fail to bind it.
    public static func freePort() throws -> Int {
        let candidates = portsOutsideTheEphemeralRange()
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<1_000 {
            let candidate = Int.random(in: candidates, using: &generator)
            guard handedOut.withLock({ $0.insert(candidate).inserted }) else { continue }
            if canBind(port: candidate) { return candidate }
        }
        throw MosquittoBrokerError("no free loopback port in \(candidates) after 1,000 attempts")
    }

    /// 10,000 up to the kernel's ephemeral range (Linux's `ip_local_port_range`; 32,768–60,999 by default), or above
    /// it when it starts too low to leave room below.
    public static func portsOutsideTheEphemeralRange() -> Range<Int> {
        let text = (try? String(contentsOfFile: "/proc/sys/net/ipv4/ip_local_port_range", encoding: .utf8)) ?? ""
        let bounds = text.split(whereSeparator: \.isWhitespace).compactMap { Int($0) }
        let (low, high) = bounds.count == 2 ? (bounds[0], bounds[1]) : (49_152, 65_535)
        if low >= 12_000 { return 10_000..<low }
        // A machine whose ephemeral range leaves no room: any port (the once-per-process rule still holds).
        return high < 63_000 ? (high + 1)..<65_536 : 10_000..<65_536
    }

    /// Whether the loopback port can be bound now (nothing listens on it, and no connection uses it).
    private static func canBind(port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return withUnsafePointer(to: address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
    }

    /// Whether something accepts TCP connections on the loopback port.
    private static func accepts(port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return withUnsafePointer(to: address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
    }

    /// Starts mosquitto, its output appended to the log, and waits (up to 5 s) until it says it runs and the port
    /// accepts connections. (The port alone is not enough: another test's broker may have taken it, and accept.)
    private static func launch(
        executable: String, configFile: URL, logFile: URL, port: Int
    ) async throws -> ChildProcess {
        let logStart = (try? FileManager.default.attributesOfItem(atPath: logFile.path)[.size] as? Int) ?? 0
        let process = try ChildProcess(
            executable: executable, arguments: ["-c", configFile.path], outputPath: logFile.path
        )
        func output() -> String {
            (try? Data(contentsOf: logFile)).map { String(decoding: $0.dropFirst(logStart), as: UTF8.self) } ?? ""
        }
        do {
            let deadline = ContinuousClock.now + .seconds(5)
            // mosquitto logs "mosquitto version … running" once its listeners are bound.
            while !(output().contains(" running") && accepts(port: port)) {
                guard process.isRunning, ContinuousClock.now < deadline, !output().contains("Address already in use")
                else {
                    throw MosquittoBrokerError("mosquitto did not start listening on port \(port):\n\(output())")
                }
                try await Task.sleep(for: .milliseconds(10))
            }
            return process
        } catch {
            end(process)
            throw error
        }
    }

    /// SIGKILL, and reap.
    private static func end(_ process: ChildProcess) {
        process.signal(SIGKILL)
        _ = process.waitForExit(timeout: .seconds(5))
    }

    /// Runs a tool to completion (without blocking a thread); throws with its output when it fails.
    @discardableResult
    func run(_ executable: String, _ arguments: [String]) async throws -> String {
        try await Self.run(executable, arguments, outputIn: directory)
    }

    @discardableResult
    static func run(_ executable: String, _ arguments: [String], outputIn directory: URL) async throws -> String {
        let outputFile = directory.appendingPathComponent("run-\(UUID().uuidString).out")
        defer { try? FileManager.default.removeItem(at: outputFile) }
        let process = try ChildProcess(executable: executable, arguments: arguments, outputPath: outputFile.path)
        let status = try await process.exit(timeout: .seconds(30))
        let text = (try? String(contentsOf: outputFile, encoding: .utf8)) ?? ""
        guard status == 0 else {
            throw MosquittoBrokerError("\(executable) \(arguments.joined(separator: " ")) exited with \(status): \(text)")
        }
        return text
    }
}

/// A running `mosquitto_sub` (or other client tool), its output going to a file.
public final class MosquittoClientProcess: Sendable {
    /// The MQTT client identifier it connected with.
    public let clientID: String
    private let process: ChildProcess
    private let outputFile: URL

    init(executable: String, arguments: [String], clientID: String, directory: URL) throws {
        self.clientID = clientID
        outputFile = directory.appendingPathComponent("\(clientID).out")
        process = try ChildProcess(executable: executable, arguments: arguments, outputPath: outputFile.path)
    }

    /// Kills it with SIGKILL: the broker sees the connection drop without DISCONNECT (and publishes its will).
    public func kill() {
        process.signal(SIGKILL)
        _ = process.waitForExit(timeout: .seconds(5))
    }

    /// Waits for it to exit and returns its output lines; throws when it failed (for `mosquitto_sub`: when its
    /// `-W` timeout passed before its `-C` count of messages arrived).
    public func output() async throws -> [String] {
        let code = try await process.exit()
        let text = (try? String(contentsOf: outputFile, encoding: .utf8)) ?? ""
        guard code == 0 else {
            throw MosquittoBrokerError("\((process.executable as NSString).lastPathComponent) exited with \(code): \(text)")
        }
        return text.split(separator: "\n", omittingEmptySubsequences: true).map(String.init)
    }
}
