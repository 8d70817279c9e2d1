import AccessoryModel

/// Every accessory the bridge knows, in a dense array found through one index, and which accessories each hub has
/// (so that a hub's status touches only its own). Accessories are kept compact (``StoredAccessory``) and converted
/// as they are read and saved.
struct AccessoryStore: Sendable {
    /// Finds an id's slot in ``accessories``, which holds the ids (about 8 bytes per accessory, where a dictionary
    /// from id to slot takes about 50).
    private var index = SlotIndex()
    private var accessories: [StoredAccessory] = []
    /// The hubs accessories were paired with, numbered in the order they appeared (few: a hub has many accessories).
    private var hubs: [HubID] = []
    private var hubNumbers: [HubID: Int32] = [:]
    /// The slots of each hub's accessories, by hub number (4 bytes each, where an id takes 16).
    private var byHub: [[Int32]] = []
    // What few accessories have, by slot (see StoredAccessory.extras), each in a table of its own, whose storage is
    // sized by its own entries and given back once they went (diagnostics are common for a while during a set-up).
    private var lastErrors = SparseTable<Int32, AccessoryControlError>()
    private var diagnostics = SparseTable<Int32, [Diagnostic]>()
    private var configurations = SparseTable<Int32, Configuration>()
    private var pinnedSources = SparseTable<Int32, BluetoothAddress>()
    private var wideCapabilities = SparseTable<Int32, StoredAccessory.WideCapabilities>()
    /// How many accessories are in each registration, and how many routing counts as worn: kept as accessories are
    /// saved, so that the statistics read them without a walk over every accessory on the network thread (a million at
    /// a fleet's scale: docs/performance-history.md, "Counts kept as the store changes").
    private(set) var registrations = CaseCounts<Registration>()
    private(set) var wornCount = 0

    var count: Int { accessories.count }

    subscript(id: AccessoryID) -> Accessory? {
        index.slot(of: id, in: accessories).map(accessory(at:))
    }

    /// Every accessory, in no particular order, made as it is read.
    var all: some Sequence<Accessory> {
        accessories.indices.lazy.map(accessory(at:))
    }

    /// Every accessory's id, in the order of ``all``, read without making each accessory whole.
    var ids: [AccessoryID] { accessories.map(\.id) }

    /// Whether an accessory was ever paired with `hub`.
    func knows(_ hub: HubID) -> Bool { hubNumbers[hub] != nil }

    /// The accessories paired with `hub` (or last paired with it, when unpaired).
    func ids(of hub: HubID) -> [AccessoryID] {
        guard let number = hubNumbers[hub] else { return [] }
        return byHub[Int(number)].map { accessories[Int($0)].id }
    }

    /// Adds `accessory`, or replaces the one with its id.
    mutating func save(_ accessory: Accessory) {
        let hub = number(of: accessory.hub)
        let stored = StoredAccessory(accessory, hub: hub)
        let slot: Int
        var previousExtras: StoredAccessory.Extras = []
        if let known = index.slot(of: accessory.id, in: accessories) {
            slot = known
            let previous = accessories[slot]
            previousExtras = previous.extras
            registrations.remove(previous.registration)
            if previous.isWorn { wornCount -= 1 }
            accessories[slot] = stored
            if previous.hub != hub {
                byHub[Int(previous.hub)].removeAll { $0 == slot }
                byHub[Int(hub)].append(Int32(slot))
            }
        } else {
            precondition(accessories.count < Int32.max, "too many accessories for one store")
            slot = accessories.count
            accessories.append(stored)
            index.insert(slot, of: accessories)
            byHub[Int(hub)].append(Int32(slot))
        }
        registrations.add(stored.registration)
        if stored.isWorn { wornCount += 1 }
        // Only the tables that held or now hold something for it are touched.
        let key = Int32(slot)
        let touched = previousExtras.union(stored.extras)
        if touched.contains(.lastError) { lastErrors[key] = accessory.lastError }
        if touched.contains(.diagnostics) {
            diagnostics[key] = stored.extras.contains(.diagnostics) ? accessory.diagnostics : nil
        }
        if touched.contains(.configuration) {
            configurations[key] = stored.extras.contains(.configuration) ? accessory.configuration : nil
        }
        if touched.contains(.pinnedSource) { pinnedSources[key] = accessory.pinnedSource }
        if touched.contains(.capabilities) {
            wideCapabilities[key] =
                stored.extras.contains(.capabilities)
                ? StoredAccessory.WideCapabilities(
                    configuration: accessory.configuration.deviceCapabilities, hardware: accessory.hardwareCapabilities)
                : nil
        }
    }

    private func accessory(at slot: Int) -> Accessory {
        let stored = accessories[slot]
        let key = Int32(slot)
        let extras = stored.extras
        var beside = StoredAccessory.Beside()
        if !extras.isEmpty {
            if extras.contains(.lastError) { beside.lastError = lastErrors[key] }
            if extras.contains(.diagnostics) { beside.diagnostics = diagnostics[key] ?? [] }
            if extras.contains(.configuration) { beside.configuration = configurations[key] }
            if extras.contains(.pinnedSource) { beside.pinnedSource = pinnedSources[key] }
            if extras.contains(.capabilities) { beside.capabilities = wideCapabilities[key] }
        }
        return stored.accessory(hub: hubs[Int(stored.hub)], beside: beside)
    }

    /// The number of `hub`, given on first sight.
    private mutating func number(of hub: HubID) -> Int32 {
        if let number = hubNumbers[hub] { return number }
        let number = Int32(hubs.count)
        hubs.append(hub)
        hubNumbers[hub] = number
        byHub.append([])
        return number
    }
}
