/// The rows of the accessories that list a source, for ``RoutingEngine``: almost always one or two, kept here in 8
/// bytes. The engine keeps a third and later ones beside its entries: an array here would add 8 bytes to every source
/// it keeps (and a heap block of about 48 to each list), for what a source shared by three accessories needs.
struct RowList: Sequence, Sendable {
    private var first: Int32 = -1
    private var second: Int32 = -1

    var isEmpty: Bool { first < 0 }

    /// Adds `row` unless both places are taken; returns whether it did.
    mutating func insert(_ row: Int) -> Bool {
        precondition(row >= 0 && row <= Int(Int32.max), "row out of range")
        if first < 0 {
            first = Int32(row)
        } else if second < 0 {
            second = Int32(row)
        } else {
            return false
        }
        return true
    }

    /// Puts `new` wherever `old` appears.
    mutating func replace(_ old: Int, with new: Int) {
        let (old, new) = (Int32(old), Int32(new))
        if first == old { first = new }
        if second == old { second = new }
    }

    struct Iterator: IteratorProtocol {
        let list: RowList
        var position = 0

        mutating func next() -> Int? {
            defer { position += 1 }
            switch position {
            case 0: return list.first < 0 ? nil : Int(list.first)
            case 1: return list.second < 0 ? nil : Int(list.second)
            default: return nil
            }
        }
    }

    func makeIterator() -> Iterator { Iterator(list: self) }
}
