/// What few of many entries have at a time (the store's rare extras of an accessory, the engine's routes in force):
/// a dictionary that gives its storage back once mostly emptied. A Swift dictionary keeps its capacity when entries
/// go, and a fleet can put nearly everything in one for a while — diagnostics raised during a set-up, before the
/// first placements arrive; every phone playing in the evening. At a million accessories, such a table's storage
/// stayed at tens of megabytes after the last entry went.
public struct SparseTable<Key: Hashable & Sendable, Value: Sendable>: Sendable {
    private var entries: [Key: Value] = [:]
    /// The most entries held since the storage was last made to fit.
    private var peak = 0

    public init() {}

    public subscript(key: Key) -> Value? {
        get { entries[key] }
        set {
            entries[key] = newValue
            if newValue != nil {
                peak = max(peak, entries.count)
            } else if peak > 1_024, entries.count < peak / 4 {
                // A copy's storage fits what is left: rare (each time, the table lost three quarters of its peak).
                entries = Dictionary(uniqueKeysWithValues: entries.lazy.map { ($0.key, $0.value) })
                peak = entries.count
            }
        }
    }

    public var count: Int { entries.count }
    /// How many entries it can hold without growing (its storage).
    public var capacity: Int { entries.capacity }
}
