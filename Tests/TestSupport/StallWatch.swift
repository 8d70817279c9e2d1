import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A diagnostic for `make test-stress`: when `AUDIO_STALL_DUMP` names a directory, a thread outside Swift's
/// cooperative pool hands the pool an empty task every half second. When one has not started after 5 s, it writes
/// every thread's stack (`gdb -batch`, when installed) to `stall-<pid>-<n>.txt` in that directory, at most 3 times a
/// process, and says on stderr how long the pool ran nothing. Without the variable it does nothing.
///
/// Started by ``MosquittoBroker``, which nearly every test that waits on another process makes.
public enum StallWatch {
    private static let directory = ProcessInfo.processInfo.environment["AUDIO_STALL_DUMP"]

    private static let started: Bool = {
        guard let directory, !directory.isEmpty else { return false }
        let thread = Thread { watch(dumpingTo: directory) }
        thread.name = "stall-watch"
        thread.start()
        return true
    }()

    /// Starts the watch once per process (when `AUDIO_STALL_DUMP` is set).
    public static func start() {
        _ = started
    }

    private final class Probe: Sendable {
        let ran = Atomic<Bool>(false)
    }

    private static func watch(dumpingTo directory: String) {
        let threshold = Duration.seconds(5)
        var dumps = 0
        while true {
            let probe = Probe()
            let sent = ContinuousClock.now
            Task.detached { probe.ran.store(true, ordering: .relaxed) }
            var dumped: String?
            // gdb stops the whole process while it reads the stacks: the time it runs is not counted as the pool's.
            var held = Duration.zero
            while !probe.ran.load(ordering: .relaxed) {
                usleep(50_000)
                if dumped == nil, dumps < 3, ContinuousClock.now - sent >= threshold {
                    dumps += 1
                    let attached = ContinuousClock.now
                    dumped = dump(number: dumps, into: directory)
                    held = ContinuousClock.now - attached
                }
            }
            let waited = ContinuousClock.now - sent
            if waited >= threshold {
                let where_ = dumped.map { ", stacks in \($0)" } ?? ""
                let line = "StallWatch: Swift's cooperative pool started nothing for \(text(waited - held))"
                    + " (and \(text(held)) while gdb ran, which stops the process to read its stacks)\(where_)\n"
                FileHandle.standardError.write(Data(line.utf8))
            }
            usleep(500_000)
        }
    }

    private static func text(_ duration: Duration) -> String {
        let (seconds, attoseconds) = duration.components
        return String(format: "%.1f s", Double(seconds) + Double(attoseconds) / 1e18)
    }

    /// Every thread's stack by gdb, attached for a moment; the file's path.
    private static func dump(number: Int, into directory: String) -> String? {
        let gdb = "/usr/bin/gdb"
        guard FileManager.default.isExecutableFile(atPath: gdb) else { return nil }
        let path = "\(directory)/stall-\(getpid())-\(number).txt"
        guard
            let process = try? ChildProcess(
                executable: gdb,
                arguments: [
                    "-p", "\(getpid())", "-batch", "-nx", "-iex", "set complaints 0", "-ex", "info threads", "-ex",
                    "thread apply all bt 30",
                ],
                outputPath: path)
        else { return nil }
        _ = process.waitForExit(timeout: .seconds(120))
        return path
    }
}
