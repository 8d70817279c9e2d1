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
    /// What few accessories have, by slot (see ``StoredAccessory/Beside``).
    private var beside: [Int32: StoredAccessory.Beside] = [:]

    var count: Int { accessories.count }

    subscript(id: AccessoryID) -> Accessory? {
        index.slot(of: id, in: accessories).map(accessory(at:))
    }

    /// Every accessory, in no particular order, made as it is read.
    var all: some Sequence<Accessory> {
        accessories.indices.lazy.map(accessory(at:))
    }

    /// Every accessory's routing view, in no particular order: for counting, without making each ``Accessory``.
    var routingViews: some Sequence<RoutingAccessory> {
        accessories.indices.lazy.map { slot in
            accessories[slot].routingView ?? RoutingAccessory(accessory(at: slot))
        }
    }

    /// The accessories paired with `hub` (or last paired with it, when unpaired).
    func ids(of hub: HubID) -> [AccessoryID] {
        guard let number = hubNumbers[hub] else { return [] }
        return byHub[Int(number)].map { accessories[Int($0)].id }
    }

    /// Adds `accessory`, or replaces the one with its id.
    mutating func save(_ accessory: Accessory) {
        let hub = number(of: accessory.hub)
        let (stored, kept) = StoredAccessory.split(accessory, hub: hub)
        let slot: Int
        var hadBeside = false
        if let known = index.slot(of: accessory.id, in: accessories) {
            slot = known
            hadBeside = accessories[slot].hasBeside
            let previousHub = accessories[slot].hub
            accessories[slot] = stored
            if previousHub != hub {
                byHub[Int(previousHub)].removeAll { $0 == slot }
                byHub[Int(hub)].append(Int32(slot))
            }
        } else {
            precondition(accessories.count < Int32.max, "too many accessories for one store")
            slot = accessories.count
            accessories.append(stored)
            index.insert(slot, of: accessories)
            byHub[Int(hub)].append(Int32(slot))
        }
        // The table is touched only when it held or now holds something for it.
        if hadBeside || kept != nil { beside[Int32(slot)] = kept }
    }

    private func accessory(at slot: Int) -> Accessory {
        let stored = accessories[slot]
        return stored.accessory(hub: hubs[Int(stored.hub)], beside: stored.hasBeside ? beside[Int32(slot)] : nil)
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
