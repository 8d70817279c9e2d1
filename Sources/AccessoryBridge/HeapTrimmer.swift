import Synchronization

#if canImport(CMalloc)
import CMalloc
#endif

/// Gives glibc's free heap memory back to the system once the bridge is quiet after a busy spell.
///
/// A burst — a fleet's set-up, the backlog after an outage, a restart, the outbound queue filling — leaves freed
/// chunks between live ones. glibc keeps them for reuse and returns only the top of its heap on its own, so they
/// count in the bridge's RSS long after the burst. `malloc_trim(0)` hands their pages back (what that is worth:
/// docs/performance-history.md, "The heap trimmer").
///
/// The decision is made once per statistics interval (``intervalEnded()``): trim after the first interval without a
/// message that follows a busy one, never while messages arrive (the pages would be faulted in again at once).
struct HeapTrimmer: Sendable {
    private var handledThisInterval = false
    private var busySinceTrim = false

    /// A message was handled (or, at start-up, the retained states were read).
    mutating func busy() {
        handledThisInterval = true
    }

    /// A statistics interval ended: whether to trim now.
    mutating func intervalEnded() -> Bool {
        defer { handledThisInterval = false }
        if handledThisInterval {
            busySinceTrim = true
            return false
        }
        guard busySinceTrim else { return false }
        busySinceTrim = false
        return true
    }

    /// Fixes glibc's thresholds, once, before the bridge allocates much: blocks of 1 MiB and more (the store's and the
    /// engine's arrays and indexes) get pages of their own, given back when freed, and a heap's free top beyond
    /// 128 KiB is given back too. glibc's defaults move both up as large blocks are freed (to 32 and 64 MiB), and
    /// `malloc_trim` never touches the free top of a thread's heap, so a fleet's worth of freed arrays stayed resident.
    static func configureAllocator() {
        #if canImport(CMalloc)
        _ = mallopt(M_MMAP_THRESHOLD, 1 << 20)
        _ = mallopt(M_TRIM_THRESHOLD, 128 << 10)
        #endif
    }

    /// Returns free heap memory to the system (glibc only; elsewhere nothing), unless it was done in the last
    /// second: `malloc_trim` is the whole process's, and a cluster member's slots, each with a trimmer of its own,
    /// would otherwise each trim after their start (256 slots: a quarter of an idle member's CPU, in `madvise` and
    /// its TLB flushes).
    static func trim() {
        #if canImport(CMalloc)
        let now = Int64((ContinuousClock.now - origin) / .milliseconds(1))
        let last = lastTrim.load(ordering: .relaxed)
        guard now - last >= 1_000, lastTrim.compareExchange(expected: last, desired: now, ordering: .relaxed).exchanged
        else { return }
        _ = malloc_trim(0)
        #endif
    }

    /// When the process last trimmed, in milliseconds since ``origin``.
    private static let lastTrim = Atomic<Int64>(-1_000)
    private static let origin = ContinuousClock.now
}
