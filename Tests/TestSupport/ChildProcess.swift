import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A child process started with `posix_spawn`, its output appended to a file.
///
/// Not Foundation's `Process`: a child spawned by it from the test runner inherits a signal mask with SIGTERM
/// blocked (seen on Linux with swift-corelibs-foundation), so mosquitto would ignore a graceful stop. This sets
/// an empty mask and default signal handlers in the child.
public final class ChildProcess: Sendable {
    /// The child's process id.
    public let pid: pid_t
    /// The path it runs.
    public let executable: String
    /// The exit status once reaped (`waitpid`); `nil` while running.
    private let exitStatus = Mutex<Int32?>(nil)

    /// Starts `executable` with `arguments`; stdin is /dev/null, stdout and stderr are appended to `outputPath`.
    public init(executable: String, arguments: [String], outputPath: String) throws {
        self.executable = executable
        var fileActions = Self.makeFileActions()
        defer { posix_spawn_file_actions_destroy(&fileActions) }
        posix_spawn_file_actions_addopen(&fileActions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&fileActions, 1, outputPath, O_WRONLY | O_CREAT | O_APPEND, 0o644)
        posix_spawn_file_actions_adddup2(&fileActions, 1, 2)

        var attributes = Self.makeAttributes()
        defer { posix_spawnattr_destroy(&attributes) }
        var emptyMask = sigset_t()
        sigemptyset(&emptyMask)
        posix_spawnattr_setsigmask(&attributes, &emptyMask)
        var allSignals = sigset_t()
        sigfillset(&allSignals)
        posix_spawnattr_setsigdefault(&attributes, &allSignals)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

        let argv: [UnsafeMutablePointer<CChar>?] = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { for argument in argv { free(argument) } }
        var pid: pid_t = 0
        let rc = posix_spawn(&pid, executable, &fileActions, &attributes, argv, environ)
        guard rc == 0 else {
            throw MosquittoBrokerError("posix_spawn \(executable) failed: \(String(cString: strerror(rc)))")
        }
        self.pid = pid
    }

    deinit {
        if isRunning {
            signal(SIGKILL)
            _ = waitForExit(timeout: .seconds(5))
        }
    }

    /// Whether the process still runs (reaps it when it has ended).
    public var isRunning: Bool {
        exitStatus.withLock { status in
            guard status == nil else { return false }
            var raw: Int32 = 0
            let reaped = waitpid(pid, &raw, WNOHANG)
            if reaped == pid {
                status = raw
                return false
            }
            return reaped == 0
        }
    }

    /// The exit code (0 for success), or 128 + the signal that ended it; `nil` while running.
    public var exitCode: Int32? {
        guard !isRunning, let raw = exitStatus.withLock({ $0 }) else { return nil }
        let signal = raw & 0x7F
        return signal == 0 ? (raw >> 8) & 0xFF : 128 + signal
    }

    /// Sends `signal` (such as `SIGTERM`) unless the process has ended.
    public func signal(_ signal: Int32) {
        guard isRunning else { return }
        _ = kill(pid, signal)
    }

    /// Polls until the process has ended; `false` on timeout.
    public func waitForExit(timeout: Duration) -> Bool {
        let deadline = ContinuousClock.now + timeout
        while isRunning {
            if ContinuousClock.now >= deadline { return false }
            usleep(2_000)
        }
        return true
    }

    /// Suspends until the process has ended; after `timeout`, kills it and throws, so that a test waiting for a
    /// process that waits for something that never comes fails instead of hanging.
    public func exit(timeout: Duration = .seconds(60)) async throws -> Int32 {
        let deadline = ContinuousClock.now + timeout
        while isRunning {
            guard ContinuousClock.now < deadline else {
                signal(SIGKILL)
                throw MosquittoBrokerError("\(executable) did not exit within \(timeout): killed")
            }
            try await Task.sleep(for: .milliseconds(5))
        }
        return exitCode ?? -1
    }

    #if canImport(Darwin)
    private static func makeFileActions() -> posix_spawn_file_actions_t? {
        var actions: posix_spawn_file_actions_t?
        posix_spawn_file_actions_init(&actions)
        return actions
    }

    private static func makeAttributes() -> posix_spawnattr_t? {
        var attributes: posix_spawnattr_t?
        posix_spawnattr_init(&attributes)
        return attributes
    }
    #else
    private static func makeFileActions() -> posix_spawn_file_actions_t {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        return actions
    }

    private static func makeAttributes() -> posix_spawnattr_t {
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        return attributes
    }
    #endif
}
