/// An optional slot of the routing engine's arrays, in 4 bytes where an `Int?` takes 9 (16 with padding): the
/// engine keeps one in every accessory and source entry.
@propertyWrapper
struct OptionalSlot: Sendable {
    private var slot: Int32 = -1

    init(wrappedValue: Int?) {
        self.wrappedValue = wrappedValue
    }

    var wrappedValue: Int? {
        get { slot < 0 ? nil : Int(slot) }
        set {
            precondition(newValue.map { $0 >= 0 && $0 <= Int(Int32.max) } ?? true, "slot out of range")
            slot = newValue.map(Int32.init) ?? -1
        }
    }
}
