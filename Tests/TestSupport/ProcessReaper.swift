import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Ends the processes a deinit lets go of, on a thread of its own: a deinit cannot await, and one that waits for an
/// exit blocks a thread of Swift's cooperative pool, which has one thread per core. Under `make test-stress` (two
/// cores, two CPU hogs) the brokers of tests ending together each held one for the seconds mosquitto takes to stop, and
/// every other test's tasks (in-process bridges starting, peers waiting) stood still for up to 30 s: ~30 tests failed
/// at once with "0 of 1 messages on audio/bridge/status" (`StallWatch` caught the pool's threads in these deinits).
///
/// One thread polls every process handed over, so a slow stop holds up nothing else. When the test process exits, it
/// waits up to 15 s for what is still ending (`atexit`), so that no broker outlives the run and each test's files are
/// removed as its deinit asked.
enum ProcessReaper {
    private enum Ending: Sendable {
        /// Signalled already; killed at `killAt` if still running; `then` once it has exited.
        case process(ChildProcess, killAt: ContinuousClock.Instant, then: (@Sendable () -> Void)?)
        /// Killed already by an owner that is gone: reaped, then `then`.
        case pid(pid_t, then: (@Sendable () -> Void)?)
    }

    private static let endings = Mutex<[Ending]>([])
    private static let added = DispatchSemaphore(value: 0)
    /// Handed over and not yet ended.
    private static let outstanding = Atomic<Int>(0)

    private static let started: Bool = {
        let thread = Thread { run() }
        thread.name = "process-reaper"
        thread.start()
        atexit { ProcessReaper.drain(timeout: .seconds(15)) }
        return true
    }()

    /// Sends `signal` to `process` and returns at once; on the reaper's thread, `process` gets SIGKILL if it is still
    /// running after `grace`, is reaped, and then `then` runs.
    static func end(
        _ process: ChildProcess, signal: Int32, grace: Duration, then: (@Sendable () -> Void)? = nil
    ) {
        process.signal(signal)
        add(.process(process, killAt: .now + grace, then: then))
    }

    /// Reaps `pid`, a child already sent SIGKILL whose owner is gone; then `then` runs.
    static func reap(killed pid: pid_t, then: (@Sendable () -> Void)? = nil) {
        add(.pid(pid, then: then))
    }

    private static func add(_ ending: Ending) {
        _ = started
        outstanding.add(1, ordering: .relaxed)
        endings.withLock { $0.append(ending) }
        added.signal()
    }

    /// Waits until everything handed over has ended, or `timeout`.
    private static func drain(timeout: Duration) {
        let deadline = ContinuousClock.now + timeout
        while outstanding.load(ordering: .relaxed) > 0, ContinuousClock.now < deadline { usleep(5_000) }
    }

    private static func run() {
        while true {
            added.wait()
            // Everything added meanwhile is taken on this turn; the semaphore's count is drained as it is seen.
            var pending: [Ending] = []
            repeat {
                pending += endings.withLock { endings in defer { endings = [] }; return endings }
                pending = pending.filter { ending in
                    guard hasEnded(ending) else { return true }
                    outstanding.subtract(1, ordering: .relaxed)
                    return false
                }
                if !pending.isEmpty { usleep(5_000) }
                while added.wait(timeout: .now()) == .success {}
            } while !pending.isEmpty || !endings.withLock({ $0.isEmpty })
        }
    }

    /// Whether `ending` is over (then its follow-up has run); SIGKILL once its grace is over.
    private static func hasEnded(_ ending: Ending) -> Bool {
        switch ending {
        case .process(let process, let killAt, let then):
            guard process.isRunning else {
                then?()
                return true
            }
            if ContinuousClock.now >= killAt { process.signal(SIGKILL) }
            return false
        case .pid(let pid, let then):
            var status: Int32 = 0
            let reaped = waitpid(pid, &status, WNOHANG)
            guard reaped == pid || (reaped < 0 && errno != EINTR) else { return false }
            then?()
            return true
        }
    }
}
