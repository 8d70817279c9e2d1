/// An element of a dense array that a ``SlotIndex`` finds by its key.
public protocol SlotIndexed {
    associatedtype IndexKey: Hashable
    var indexKey: IndexKey { get }
}

/// Finds the slot of a key in a dense array whose elements hold their keys: an open-addressing hash table of 4-byte
/// slots, where a `[Key: Int]` beside the array keeps a second copy of every key and an 8-byte value.
///
/// At a million entries a dictionary from a 16-byte id to a slot takes about 50 bytes per entry (24-byte buckets, at
/// most three quarters full, doubling); this takes about 8. The price: every operation reads keys from the array, so
/// the owner passes it, and changes the index in step with it (it holds only what the array holds).
///
/// Linear probing, at most three quarters full; removal shifts later entries back (no tombstones), so lookups stay
/// short however many removals there were.
///
/// Public and inlinable so that an owner in another module (the bridge's store) gets it specialized for its element:
/// unspecialized, every key read copied the whole element through its value witness, a tenth of a restart's time
/// (a `package` declaration's body is not inlined across modules without library evolution).
public struct SlotIndex: Sendable {
    @usableFromInline static let empty: Int32 = -1

    /// Slots, or ``empty``; the count is a power of two (or zero before the first insertion).
    @usableFromInline var buckets: [Int32] = []
    @usableFromInline var occupied = 0

    /// How many slots it indexes.
    @inlinable public var count: Int { occupied }

    @inlinable public init() {}

    /// The slot of the element of `elements` whose key is `key`, if the index has one.
    @inlinable public func slot<Element: SlotIndexed>(of key: Element.IndexKey, in elements: [Element]) -> Int? {
        guard !buckets.isEmpty else { return nil }
        var bucket = home(of: key)
        while true {
            let slot = buckets[bucket]
            if slot == Self.empty { return nil }
            if elements[Int(slot)].indexKey == key { return Int(slot) }
            bucket = next(bucket)
        }
    }

    /// Indexes `elements[slot]`, whose key the index does not hold yet.
    @inlinable public mutating func insert<Element: SlotIndexed>(_ slot: Int, of elements: [Element]) {
        precondition(slot >= 0 && slot < Int(Int32.max), "slot out of range")
        if (occupied + 1) * 4 > buckets.count * 3 { grow(elements) }
        let key = elements[slot].indexKey
        var bucket = home(of: key)
        while buckets[bucket] != Self.empty {
            assert(elements[Int(buckets[bucket])].indexKey != key, "the key is in the index already")
            bucket = next(bucket)
        }
        buckets[bucket] = Int32(slot)
        occupied += 1
    }

    /// Forgets `elements[slot]` (call it before the array changes).
    @inlinable public mutating func remove<Element: SlotIndexed>(_ slot: Int, of elements: [Element]) {
        var hole = bucket(holding: slot, key: elements[slot].indexKey)
        // Backward shift: an entry after the hole moves into it unless its home lies cyclically in (hole, bucket].
        var bucket = next(hole)
        while buckets[bucket] != Self.empty {
            let wanted = home(of: elements[Int(buckets[bucket])].indexKey)
            let staysPut = hole <= bucket ? (hole < wanted && wanted <= bucket) : (hole < wanted || wanted <= bucket)
            if !staysPut {
                buckets[hole] = buckets[bucket]
                hole = bucket
            }
            bucket = next(bucket)
        }
        buckets[hole] = Self.empty
        occupied -= 1
    }

    /// Records that the array moved the element at `old` to `new` (to fill a hole).
    @inlinable public mutating func move<Element: SlotIndexed>(from old: Int, to new: Int, of elements: [Element]) {
        buckets[bucket(holding: old, key: elements[new].indexKey)] = Int32(new)
    }

    @inlinable func bucket(holding slot: Int, key: some Hashable) -> Int {
        var bucket = home(of: key)
        while buckets[bucket] != Int32(slot) {
            precondition(buckets[bucket] != Self.empty, "the slot is not in the index")
            bucket = next(bucket)
        }
        return bucket
    }

    @inlinable func home(of key: some Hashable) -> Int { key.hashValue & (buckets.count - 1) }

    @inlinable func next(_ bucket: Int) -> Int { (bucket + 1) & (buckets.count - 1) }

    @inlinable mutating func grow<Element: SlotIndexed>(_ elements: [Element]) {
        let old = buckets
        buckets = Array(repeating: Self.empty, count: max(16, old.count * 2))
        for slot in old where slot != Self.empty {
            var bucket = home(of: elements[Int(slot)].indexKey)
            while buckets[bucket] != Self.empty { bucket = next(bucket) }
            buckets[bucket] = slot
        }
    }
}
