import AccessoryModel

/// The playing devices that a slot's accessories list (their connected primary and secondary sources), with how many
/// list each: in a cluster, a slot reads the states of these devices only (docs/scale-out.md).
struct ListedSources: Sendable {
    private var counts: [BluetoothAddress: Int] = [:]

    var all: Dictionary<BluetoothAddress, Int>.Keys { counts.keys }

    func contains(_ source: BluetoothAddress) -> Bool { counts[source] != nil }

    /// An accessory that listed `old` lists `new` now; returns the devices it starts and ends listing for the slot.
    mutating func relist(from old: SourcePair, to new: SourcePair) -> (started: [BluetoothAddress], ended: [BluetoothAddress]) {
        var started: [BluetoothAddress] = []
        var ended: [BluetoothAddress] = []
        for source in old where !new.contains(source) {
            guard let count = counts[source] else { continue }
            if count <= 1 {
                counts[source] = nil
                ended.append(source)
            } else {
                counts[source] = count - 1
            }
        }
        for source in new where !old.contains(source) {
            counts[source, default: 0] += 1
            if counts[source] == 1 { started.append(source) }
        }
        return (started, ended)
    }
}
