/// What few of the store's accessories have at a time, by slot: a dictionary that gives its storage back once mostly
/// emptied. A Swift dictionary keeps its capacity when entries go, and a fleet's set-up can put every accessory in
/// one for a while (diagnostics raised before the first placement arrives: at a million accessories, the table's
/// storage then stayed at tens of megabytes after the last one went).
struct SparseTable<Value: Sendable>: Sendable {
    private var entries: [Int32: Value] = [:]
    /// The most entries held since the storage was last made to fit.
    private var peak = 0

    subscript(slot: Int32) -> Value? {
        get { entries[slot] }
        set {
            entries[slot] = newValue
            if newValue != nil {
                peak = max(peak, entries.count)
            } else if peak > 1_024, entries.count < peak / 4 {
                // A copy's storage fits what is left: rare (each time, the table lost three quarters of its peak).
                entries = Dictionary(uniqueKeysWithValues: entries.lazy.map { ($0.key, $0.value) })
                peak = entries.count
            }
        }
    }

    var count: Int { entries.count }
    /// The slots it can hold without growing (its storage).
    var capacity: Int { entries.capacity }
}
