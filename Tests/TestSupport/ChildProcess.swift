import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A child process started with `posix_spawn`, its output appended to a file, and killed when this process ends
/// however it ends.
///
/// Not Foundation's `Process`: a child spawned by it from the test runner inherits a signal mask with SIGTERM
/// blocked (seen on Linux with swift-corelibs-foundation), so mosquitto would ignore a graceful stop. This sets
/// an empty mask and default signal handlers in the child.
///
/// Each child has a watchdog, `sh -c 'read _; kill -KILL <pid>'`, whose standard input is a pipe that only this
/// process writes to: when this process ends (a crash, SIGKILL, the end of the run) the pipe closes, `read` returns and
/// the child is killed, so no broker, bridge or tool outlives the tests. Once the child is reaped, its watchdog is
/// killed before the pipe is closed (the child's pid may be reused by then). The watchdog starts no process of its own:
/// `read` and `kill` are built into the shell.
public final class ChildProcess: Sendable {
    /// The child's process id.
    public let pid: pid_t
    /// The path it runs.
    public let executable: String
    /// The exit status once reaped (`waitpid`); `nil` while running.
    private let exitStatus = Mutex<Int32?>(nil)
    /// The watchdog's pid and the write end of its pipe, until the child is reaped.
    private let watchdog = Mutex<(pid: pid_t, pipe: Int32)?>(nil)

    /// Starts `executable` with `arguments` and this process's environment with `environment` added; stdin is `input`
    /// (nothing: /dev/null), stdout and stderr are appended to `outputPath`.
    public init(
        executable: String, arguments: [String], environment: [String: String] = [:], input: String? = nil,
        outputPath: String
    ) throws {
        self.executable = executable
        var inputPath = "/dev/null"
        if let input {
            // A file of its own, unlinked once the child has it open: nothing of it stays behind.
            inputPath = FileManager.default.temporaryDirectory.appendingPathComponent("input-\(UUID().uuidString)").path
            guard FileManager.default.createFile(atPath: inputPath, contents: Data(input.utf8)) else {
                throw MosquittoBrokerError("cannot write \(inputPath)")
            }
        }
        defer { if input != nil { unlink(inputPath) } }
        pid = try Self.spawn(
            executable, arguments, environment: environment, stdin: .path(inputPath), outputPath: outputPath)
        do {
            let watched = try Self.startWatchdog(for: pid)
            watchdog.withLock { $0 = watched }
        } catch {
            kill(pid, SIGKILL)
            var status: Int32 = 0
            waitpid(pid, &status, 0)
            throw error
        }
    }

    /// Held while a child is spawned and while a watchdog's pipe is made, so that no child inherits a pipe's write
    /// end before it is marked close-on-exec.
    private static let spawning = Mutex(())

    private enum Input {
        case path(String)
        case descriptor(Int32)
    }

    private static func spawn(
        _ executable: String, _ arguments: [String], environment: [String: String] = [:], stdin: Input,
        outputPath: String
    ) throws -> pid_t {
        var fileActions = Self.makeFileActions()
        defer { posix_spawn_file_actions_destroy(&fileActions) }
        switch stdin {
        case .path(let path): posix_spawn_file_actions_addopen(&fileActions, 0, path, O_RDONLY, 0)
        case .descriptor(let descriptor): posix_spawn_file_actions_adddup2(&fileActions, descriptor, 0)
        }
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
        let rc: Int32
        if environment.isEmpty {
            rc = spawning.withLock { _ in posix_spawn(&pid, executable, &fileActions, &attributes, argv, environ) }
        } else {
            var merged = ProcessInfo.processInfo.environment
            merged.merge(environment) { $1 }
            let envp: [UnsafeMutablePointer<CChar>?] = merged.map { strdup("\($0.key)=\($0.value)") } + [nil]
            defer { for entry in envp { free(entry) } }
            rc = spawning.withLock { _ in posix_spawn(&pid, executable, &fileActions, &attributes, argv, envp) }
        }
        guard rc == 0 else {
            throw MosquittoBrokerError("posix_spawn \(executable) failed: \(String(cString: strerror(rc)))")
        }
        return pid
    }

    /// The watchdog of `child`: it kills `child` once the pipe's write end, which only this process holds
    /// (close-on-exec, so no other child inherits it), closes.
    private static func startWatchdog(for child: pid_t) throws -> (pid: pid_t, pipe: Int32) {
        // pipe2(O_CLOEXEC) is not in Swift's Glibc module: pipe, then close-on-exec, with no spawn of ours between.
        var ends: [Int32] = [0, 0]
        let made = spawning.withLock { _ in
            guard pipe(&ends) == 0 else { return false }
            _ = fcntl(ends[1], F_SETFD, FD_CLOEXEC)
            return true
        }
        guard made else { throw MosquittoBrokerError("pipe failed: errno \(errno)") }
        defer { close(ends[0]) }
        do {
            let pid = try spawn(
                "/bin/sh", ["-c", "read _; kill -KILL \(child)"], stdin: .descriptor(ends[0]), outputPath: "/dev/null")
            return (pid, ends[1])
        } catch {
            close(ends[1])
            throw error
        }
    }

    /// Ends the watchdog: killed, and once reaped its pipe closed (on ``ProcessReaper``'s thread: nothing here
    /// waits). Killed first, it cannot kill the child's pid once reused.
    private func stopWatchdog() {
        guard let running = (watchdog.withLock { running in defer { running = nil }; return running }) else { return }
        kill(running.pid, SIGKILL)
        ProcessReaper.reap(killed: running.pid) { close(running.pipe) }
    }

    deinit {
        // Killed and reaped off this thread: a deinit may run on Swift's cooperative pool (ProcessReaper says why).
        if isRunning {
            signal(SIGKILL)
            ProcessReaper.reap(killed: pid)
        }
        stopWatchdog()
    }

    /// Whether the process still runs (reaps it when it has ended).
    public var isRunning: Bool {
        let (running, reapedNow) = exitStatus.withLock { status -> (Bool, Bool) in
            guard status == nil else { return (false, false) }
            var raw: Int32 = 0
            let reaped = waitpid(pid, &raw, WNOHANG)
            if reaped == pid {
                status = raw
                return (false, true)
            }
            return (reaped == 0, false)
        }
        if reapedNow { stopWatchdog() }
        return running
    }

    /// Whether the process is stopped (SIGSTOP) as the kernel reports it: the state `T` in `/proc/<pid>/stat`
    /// (Linux). A signal is delivered when the process next runs, so a test that stopped it waits for this.
    public var isStopped: Bool {
        guard isRunning, let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let end = stat.lastIndex(of: ")")
        else { return false }
        // "pid (command) state …": the command may hold spaces and parentheses, the state follows the last ")".
        return stat[stat.index(after: end)...].split(separator: " ").first == "T"
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
