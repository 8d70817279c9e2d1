import AccessoryWire

/// The last results an accessory's lane sent, by sequence, so that a duplicate of a request (MQTT redelivery, a hub
/// retrying) gets the very same bytes back.
struct RecentResults: Sendable {
    struct Entry: Sendable {
        var sequence: UInt64
        var format: PayloadFormat
        var bytes: [UInt8]
    }

    /// How many results each accessory keeps.
    static let capacity = 16

    private var entries: [Entry] = []
    private var next = 0

    mutating func record(_ entry: Entry) {
        guard entry.sequence != 0 else { return }
        if entries.count < Self.capacity {
            entries.append(entry)
        } else {
            entries[next] = entry
            next = (next + 1) % Self.capacity
        }
    }

    func result(for sequence: UInt64) -> Entry? {
        entries.last { $0.sequence == sequence }
    }
}
