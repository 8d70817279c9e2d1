import AccessoryModel

/// Every accessory the bridge knows, in a dense array found through one index, and which accessories each hub has
/// (so that a hub's status touches only its own).
struct AccessoryStore: Sendable {
    /// Finds an id's slot in ``accessories``, which holds the ids (about 8 bytes per accessory, where a dictionary
    /// from id to slot takes about 50).
    private var index = SlotIndex()
    private var accessories: [Accessory] = []
    /// The slots of each hub's accessories (4 bytes each, where an id takes 16).
    private var byHub: [HubID: [Int32]] = [:]

    var count: Int { accessories.count }

    subscript(id: AccessoryID) -> Accessory? {
        slot(of: id).map { accessories[$0] }
    }

    /// Every accessory, in no particular order.
    var all: [Accessory] { accessories }

    /// The accessories paired with `hub` (or last paired with it, when unpaired).
    func ids(of hub: HubID) -> [AccessoryID] {
        (byHub[hub] ?? []).map { accessories[Int($0)].id }
    }

    /// Adds `accessory`, or replaces the one with its id.
    mutating func save(_ accessory: Accessory) {
        guard let slot = slot(of: accessory.id) else {
            precondition(accessories.count < Int32.max, "too many accessories for one store")
            let slot = accessories.count
            accessories.append(accessory)
            index.insert(slot, of: accessories)
            byHub[accessory.hub, default: []].append(Int32(slot))
            return
        }
        let previousHub = accessories[slot].hub
        accessories[slot] = accessory
        if previousHub != accessory.hub {
            forget(slot, of: previousHub)
            byHub[accessory.hub, default: []].append(Int32(slot))
        }
    }

    private func slot(of id: AccessoryID) -> Int? {
        index.slot(of: id, in: accessories)
    }

    private mutating func forget(_ slot: Int, of hub: HubID) {
        byHub[hub]?.removeAll { $0 == slot }
        if byHub[hub]?.isEmpty == true { byHub[hub] = nil }
    }
}
