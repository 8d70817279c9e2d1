#if canImport(Glibc)
import Glibc
#endif

/// The process's limit on open descriptors (`RLIMIT_NOFILE`). A member's slot holds about 2 (its two broker
/// connections' sockets; a libmosquitto handle has no socket pair of its own here, `cmosquitto_new`), and a slot that
/// starts about 2 more for the sessions of its start (the rebuild reader's); the soft limit many systems start a
/// service with is 1,024 (systemd's default), which a member of 512 slots passes: its later slots then fail to connect
/// with "Too many open files", again and again. So the soft limit is raised to the hard one at start, as Go's runtime
/// and most servers do (``raise()``), and a member checks it once it knows the cluster's slot count (given, or
/// recorded in etcd: at its registration).
public enum OpenFileLimit {
    /// About what a member needs to serve `slots` (every slot of the cluster, alone) while `starting` more start
    /// (their rebuild readers).
    static func needed(forSlots slots: Int, starting: Int) -> Int {
        (slots + starting) * 2 + 128
    }

    /// The soft limit now (`nil`: it could not be read).
    static func current() -> Int? {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return nil }
        return Int(clamping: limit.rlim_cur)
    }

    /// Raises the soft limit to the hard one; returns the limits before and after (`nil`: it could not be read).
    public static func raise() -> (before: Int, after: Int)? {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return nil }
        let before = Int(clamping: limit.rlim_cur)
        guard limit.rlim_cur < limit.rlim_max else { return (before, before) }
        limit.rlim_cur = limit.rlim_max
        guard setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return (before, before) }
        return (before, Int(clamping: limit.rlim_max))
    }
}
