import AccessoryModel

/// Every accessory the bridge knows, in a dense array found through one index, and which accessories each hub has
/// (so that a hub's status touches only its own).
struct AccessoryStore: Sendable {
    private var slots: [AccessoryID: Int] = [:]
    private var accessories: [Accessory] = []
    private var byHub: [HubID: [AccessoryID]] = [:]

    var count: Int { accessories.count }

    subscript(id: AccessoryID) -> Accessory? {
        slots[id].map { accessories[$0] }
    }

    /// Every accessory, in no particular order.
    var all: [Accessory] { accessories }

    /// The accessories paired with `hub` (or last paired with it, when unpaired).
    func ids(of hub: HubID) -> [AccessoryID] {
        byHub[hub] ?? []
    }

    /// Adds `accessory`, or replaces the one with its id.
    mutating func save(_ accessory: Accessory) {
        guard let slot = slots[accessory.id] else {
            slots[accessory.id] = accessories.count
            accessories.append(accessory)
            byHub[accessory.hub, default: []].append(accessory.id)
            return
        }
        let previousHub = accessories[slot].hub
        accessories[slot] = accessory
        if previousHub != accessory.hub {
            forget(accessory.id, of: previousHub)
            byHub[accessory.hub, default: []].append(accessory.id)
        }
    }

    private mutating func forget(_ id: AccessoryID, of hub: HubID) {
        byHub[hub]?.removeAll { $0 == id }
        if byHub[hub]?.isEmpty == true { byHub[hub] = nil }
    }
}
