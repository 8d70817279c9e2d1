/// Rule 5 pauses in the order they were recorded, which is the order they expire when time moves forward.
///
/// A FIFO with a moving head: appends and removals are O(1) amortized, and ``RoutingEngine/nextDeadline`` is the
/// head. Entries are checked against the source's current memory when they expire, so a pause forgotten earlier
/// (the device played again on its own) costs one spurious tick at most.
struct ExpiryQueue: Sendable {
    struct Entry: Sendable {
        var source: BluetoothAddress
        var expiresAt: Timestamp
    }

    private var entries: [Entry] = []
    private var head = 0

    var first: Entry? { head < entries.count ? entries[head] : nil }

    mutating func append(source: BluetoothAddress, expiresAt: Timestamp) {
        entries.append(Entry(source: source, expiresAt: expiresAt))
    }

    mutating func removeFirst() {
        head += 1
        if head == entries.count {
            entries.removeAll(keepingCapacity: true)
            head = 0
        } else if head >= 1024, head * 2 >= entries.count {
            entries.removeFirst(head)
            head = 0
        }
    }
}
