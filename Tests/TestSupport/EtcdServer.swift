import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A real single-node `etcd` (Debian's `etcd-server`) for the cluster's tests, on free loopback ports, with its data
/// and log in a temporary directory of its own. It fails — never skips — when etcd is not installed: `make test`
/// installs it. It stops when released.
public final class EtcdServer: Sendable {
    /// The client port (its JSON gateway too).
    public let port: Int
    private let peerPort: Int
    public let directory: URL
    public let logFile: URL
    private let executable: String
    private let process: ManagedChild

    /// The client URL: `http://127.0.0.1:{port}`.
    public var endpoint: String { "http://127.0.0.1:\(port)" }

    public init() async throws {
        executable = try MosquittoBroker.findTool("etcd", package: "etcd-server")
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("etcd-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        logFile = directory.appendingPathComponent("etcd.log")
        _ = FileManager.default.createFile(atPath: logFile.path, contents: nil)
        let process = ManagedChild()
        self.process = process
        (port, peerPort) = try await Self.launchOnFreePorts(
            executable: executable, directory: directory, logFile: logFile, into: process)
    }

    /// The first start, on two ports ``MosquittoBroker/onFreePorts(_:for:_:)`` hands out: another process may bind one
    /// between that probe and etcd's own bind (it happened once in a `make test-stress` run of three under two hogs:
    /// "listen tcp 127.0.0.1:24322: bind: address already in use"). A failed start is stopped (in an initializer, no
    /// deinit would stop it), and the next has a fresh data directory and log.
    private static func launchOnFreePorts(
        executable: String, directory: URL, logFile: URL, into process: ManagedChild
    ) async throws -> (port: Int, peerPort: Int) {
        try await MosquittoBroker.onFreePorts(2, for: "etcd") { ports in
            do {
                try await launch(
                    executable: executable, directory: directory, logFile: logFile, port: ports[0],
                    peerPort: ports[1], into: process)
                return (ports[0], ports[1])
            } catch {
                await process.stop(signal: SIGKILL)
                try? FileManager.default.removeItem(at: directory.appendingPathComponent("data"))
                _ = FileManager.default.createFile(atPath: logFile.path, contents: nil)
                throw error
            }
        }
    }

    deinit {
        let directory = directory
        process.endInBackground(signal: SIGTERM) {
            if ProcessInfo.processInfo.environment["KEEP_BROKER_FILES"] == nil {
                try? FileManager.default.removeItem(at: directory)
            }
        }
    }

    /// Starts etcd on its data directory (a new one the first time; the same after ``stop()``) and waits until it
    /// answers `/health` (on a restart it must first elect itself: 1–2 s).
    public func start() async throws {
        try await Self.launch(
            executable: executable, directory: directory, logFile: logFile, port: port, peerPort: peerPort,
            into: process)
    }

    private static func launch(
        executable: String, directory: URL, logFile: URL, port: Int, peerPort: Int, into process: ManagedChild
    ) async throws {
        let endpoint = "http://127.0.0.1:\(port)"
        let peer = "http://127.0.0.1:\(peerPort)"
        let child = try ChildProcess(
            executable: executable,
            arguments: [
                "--name", "test", "--data-dir", directory.appendingPathComponent("data").path,
                "--listen-client-urls", endpoint, "--advertise-client-urls", endpoint,
                "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                "--initial-cluster", "test=\(peer)", "--logger", "zap",
            ],
            outputPath: logFile.path)
        process.set(child)
        try await waitUntil("etcd answering on port \(port)", timeout: .seconds(20)) {
            guard child.isRunning else {
                let log = (try? String(contentsOf: logFile, encoding: .utf8)) ?? ""
                throw MosquittoBrokerError("etcd ended: \(log.suffix(2000))")
            }
            return Self.healthy(port: port)
        }
    }

    /// Stops etcd gracefully (SIGTERM) and waits until it exited.
    public func stop() async {
        await process.stop(signal: SIGTERM)
    }

    /// Stops and starts it again on the same ports and data: leases and revisions survive.
    public func restart() async throws {
        await stop()
        try await start()
    }

    /// Whether `GET /health` says `"health":"true"`.
    static func healthy(port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var timeout = timeval(tv_sec: 1, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
        guard connected else { return false }
        let request = Array("GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n".utf8)
        guard write(fd, request, request.count) == request.count else { return false }
        var response: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 1024)
        while true {
            let count = read(fd, &buffer, buffer.count)
            guard count > 0 else { break }
            response += buffer[..<count]
        }
        return String(decoding: response, as: UTF8.self).contains("\"health\":\"true\"")
    }
}

/// The one child process of a server, replaced on each start.
final class ManagedChild: Sendable {
    private let child = Mutex<ChildProcess?>(nil)

    func set(_ process: ChildProcess) {
        child.withLock { $0 = process }
    }

    /// Sends `signal` and waits up to 10 s for the exit (then SIGKILL), without blocking a thread.
    func stop(signal: Int32) async {
        guard let running = child.withLock({ value in defer { value = nil }; return value }) else { return }
        running.signal(signal)
        // On timeout, exit(timeout:) kills it.
        _ = try? await running.exit(timeout: .seconds(10))
    }

    /// ``stop(signal:)`` for deinit, which cannot await: waited for on ``ProcessReaper``'s thread, then `then` runs
    /// (at once when nothing runs).
    func endInBackground(signal: Int32, then: @escaping @Sendable () -> Void) {
        guard let running = child.withLock({ value in defer { value = nil }; return value }) else { return then() }
        ProcessReaper.end(running, signal: signal, grace: .seconds(10), then: then)
    }
}
