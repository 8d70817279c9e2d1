/// The slots of the accessories that list a source, for ``RoutingEngine``: almost always one or two, so those two
/// are kept inline and only a third or later one goes to the heap. 16 bytes, where an array of one slot is a pointer
/// and a heap block of about 48 bytes — once for every source the engine keeps.
struct SlotList: Sequence, Sendable {
    private var first: Int32 = -1
    private var second: Int32 = -1
    private var rest: [Int32] = []

    var isEmpty: Bool { first < 0 }

    mutating func append(_ slot: Int) {
        precondition(slot >= 0 && slot <= Int(Int32.max), "slot out of range")
        if first < 0 {
            first = Int32(slot)
        } else if second < 0 {
            second = Int32(slot)
        } else {
            rest.append(Int32(slot))
        }
    }

    /// Removes `slot` wherever it appears.
    mutating func remove(_ slot: Int) {
        let kept = filter { $0 != slot }
        self = SlotList()
        for slot in kept { append(slot) }
    }

    /// Puts `new` wherever `old` appears.
    mutating func replace(_ old: Int, with new: Int) {
        let (old, new) = (Int32(old), Int32(new))
        if first == old { first = new }
        if second == old { second = new }
        for index in rest.indices where rest[index] == old { rest[index] = new }
    }

    struct Iterator: IteratorProtocol {
        let list: SlotList
        var position = 0

        mutating func next() -> Int? {
            defer { position += 1 }
            switch position {
            case 0: return list.first < 0 ? nil : Int(list.first)
            case 1: return list.second < 0 ? nil : Int(list.second)
            default: return position - 2 < list.rest.count ? Int(list.rest[position - 2]) : nil
            }
        }
    }

    func makeIterator() -> Iterator { Iterator(list: self) }
}
