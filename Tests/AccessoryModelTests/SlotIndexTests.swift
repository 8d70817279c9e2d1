import TestSupport
import Testing

@testable import AccessoryModel

/// ``SlotIndex`` against a dictionary, through the way its owners use it: a dense array that appends, and removes by
/// moving its last element into the hole.
@Suite struct SlotIndexTests {
    struct Element: SlotIndexed {
        var indexKey: Key
    }

    /// A key whose hash the test chooses: `bucket` values that collide exercise probing and the backward shift
    /// across the end of the table.
    struct Key: Hashable {
        var value: Int
        var bucket: Int

        static func == (lhs: Key, rhs: Key) -> Bool { lhs.value == rhs.value }
        func hash(into hasher: inout Hasher) { hasher.combine(bucket) }
    }

    /// A dense array with its index, changed the way the routing engine and the store change theirs.
    struct Owner {
        var elements: [Element] = []
        var index = SlotIndex()

        mutating func add(_ key: Key) {
            elements.append(Element(indexKey: key))
            index.insert(elements.count - 1, of: elements)
        }

        mutating func remove(at slot: Int) {
            index.remove(slot, of: elements)
            let last = elements.count - 1
            if slot != last {
                elements[slot] = elements[last]
                index.move(from: last, to: slot, of: elements)
            }
            elements.removeLast()
        }

        func slot(of key: Key) -> Int? { index.slot(of: key, in: elements) }
    }

    /// `keys` distinct keys in `hashes` groups of equal hash, inserted and removed at random. A few keys in a small
    /// table often make clusters that cross its end, where the backward shift is subtle (checked after every step);
    /// more keys make it grow (checked now and then).
    @Test(arguments: [(1, 40), (3, 40), (1_000_000, 40), (16, 3_000), (1_000_000, 3_000)])
    func agreesWithADictionaryThroughInsertionsAndRemovals(hashes: Int, keys: Int) async throws {
        try await inTheBackground {
            var random = SeededGenerator(seed: UInt64(hashes * keys))
            var owner = Owner()
            var present = Set<Int>()
            for step in 0..<10_000 {
                let value = Int.random(in: 0..<keys, using: &random)
                let key = Key(value: value, bucket: value % hashes)
                if present.contains(value), Bool.random(using: &random) {
                    owner.remove(at: owner.slot(of: key)!)
                    present.remove(value)
                } else if !present.contains(value) {
                    owner.add(key)
                    present.insert(value)
                }
                if keys <= 40 || step % 997 == 0 || step == 9_999 {
                    #expect(owner.index.count == present.count)
                    for value in 0..<keys {
                        let slot = owner.slot(of: Key(value: value, bucket: value % hashes))
                        #expect(slot.map { owner.elements[$0].indexKey.value } == (present.contains(value) ? value : nil))
                    }
                }
            }
        }
    }

    @Test func anEmptyIndexFindsNothing() {
        let owner = Owner()
        #expect(owner.slot(of: Key(value: 1, bucket: 1)) == nil)
        #expect(owner.index.count == 0)
    }
}
