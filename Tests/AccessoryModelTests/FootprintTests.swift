import Testing

@testable import AccessoryModel

/// What a bridge keeps for every accessory and source, in bytes: the memory benchmark's figure per accessory is made
/// of these (`make bench-memory`). A field added or reordered carelessly shows here first.
@Suite struct FootprintTests {
    @Test func perAccessoryRecordsStaySmall() {
        #expect(MemoryLayout<SourcePair>.stride == 16)
        #expect(MemoryLayout<Accessory>.stride == 184)
        #expect(MemoryLayout<RoutingAccessory>.stride == 56)
        #expect(MemoryLayout<RoutingEngine.AccessoryEntry>.stride == 72)
        #expect(MemoryLayout<RoutingEngine.SourceEntry>.stride == 72)
        #expect(MemoryLayout<SlotList>.stride == 16)
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

    @Test func slotListKeepsTwoInlineAndMoreBeyond() {
        var list = SlotList()
        #expect(list.isEmpty && Array(list).isEmpty)
        for slot in [7, 3, 9, 4] { list.append(slot) }
        #expect(Array(list) == [7, 3, 9, 4])
        list.remove(3)
        #expect(Array(list) == [7, 9, 4])
        list.replace(9, with: 1)
        #expect(Array(list) == [7, 1, 4])
        list.remove(7)
        list.remove(4)
        #expect(Array(list) == [1])
        list.remove(1)
        #expect(list.isEmpty)
    }
}
