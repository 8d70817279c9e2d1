import TestSupport
import Testing

@testable import AccessoryModel

/// What a bridge keeps for every accessory and source, in bytes: the memory benchmark's figure per accessory is made
/// of these (`make bench-memory`). A field added or reordered carelessly shows here first.
@Suite struct FootprintTests {
    @Test func perAccessoryRecordsStaySmall() {
        #expect(MemoryLayout<SourcePair>.stride == 16)
        // 184 until iOS 27's spatial extension description (24 bytes): the store keeps it beside the record.
        #expect(MemoryLayout<Accessory>.stride == 208)
        #expect(MemoryLayout<RoutingAccessory>.stride == 48)
        #expect(MemoryLayout<RoutingTable.AccessoryEntry>.stride == 64)
        #expect(MemoryLayout<RoutingTable.SourceEntry>.stride == 48)
        #expect(MemoryLayout<RowList>.stride == 8)
    }

    /// A pair packs each address in 64 bits with an out-of-range value for "none": the lowest and highest addresses
    /// are still addresses.
    @Test func sourcePairHoldsTheExtremeAddresses() {
        let (low, high) = (BluetoothAddress(rawValue: 0)!, BluetoothAddress(rawValue: 0xFFFF_FFFF_FFFF)!)
        #expect(Array(SourcePair(primary: low, secondary: high)) == [low, high])
        #expect(SourcePair(primary: nil, secondary: high).primary == high)
        #expect(SourcePair(primary: low, secondary: nil).contains(low))
        #expect(!SourcePair(primary: low, secondary: nil).contains(high))
    }

    @Test func slotListKeepsTwo() {
        var list = RowList()
        #expect(list.isEmpty && Array(list).isEmpty)
        let (first, second, third) = (list.insert(7), list.insert(3), list.insert(9))
        #expect(first && second)
        #expect(!third, "a third goes beside, in the engine")
        #expect(Array(list) == [7, 3])
        list.replace(3, with: 1)
        #expect(Array(list) == [7, 1])
    }

    /// A phone that five accessories list: two are kept in its entry, three beside; listings removed and slots
    /// moved (an accessory forgotten moves the last into its slot) keep both in step.
    @Test func aSourceListedByManyAccessoriesFindsTheRightOnes() {
        let phone = Fixture.phone
        let ids = (0..<5).map { AccessoryID("acc-\($0)")! }
        var h = RoutingHarness()
        for id in ids {
            h.register(id, placement: .onHead, sources: [phone])
            h.advance(.seconds(1))
        }
        // acc-4, the most recently worn, is the target; then it stops listing the phone.
        h.connect(ids[4], [])
        // acc-1 is forgotten (unpaired): the last entry moves into its slot.
        h.registration(ids[1], .unpaired)
        // acc-3 is taken off: acc-2 is the most recently worn that lists the phone.
        h.place(ids[3], .offHead)
        #expect(h.source(phone, .media) == [.route(phone, ids[2], .sourceActivated)])
        h.source(phone, .idle)
        #expect(h.place(ids[2], .offHead) == [.pause(phone, ids[2], .takenOff)])
        for id in [ids[0], ids[2], ids[3]] { h.connect(id, []) }
        // Once rule 5's window closed, nothing keeps the phone.
        h.advance(.seconds(16))
        h.tick()
        #expect(h.engine.footprint.sources == 0, "no listing is left behind")
        h.connect(ids[0], [phone])
        h.place(ids[0], .onHead)
        #expect(h.source(phone, .call) == [.route(phone, ids[0], .sourceActivated)])
    }

    /// A table every accessory was in for a while (diagnostics during a set-up) gives its storage back as they leave
    /// it, and keeps what is left.
    @Test func aSparseTableGivesItsStorageBack() async throws {
        try await inTheBackground {
            var table = SparseTable<Int32, [Diagnostic]>()
            for slot in Int32(0)..<100_000 { table[slot] = [.reported("no placement yet")] }
            let full = table.capacity
            for slot in Int32(0)..<99_990 { table[slot] = nil }
            #expect(table.count == 10)
            #expect(table.capacity < full / 100)
            for slot in Int32(99_990)..<100_000 { #expect(table[slot] == [.reported("no placement yet")]) }
            #expect(table[5] == nil)
        }
    }
}
