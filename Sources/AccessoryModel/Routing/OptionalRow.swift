/// An optional row of the routing engine's arrays, in 4 bytes where an `Int?` takes 9 (16 with padding): the
/// engine keeps one in every accessory and source entry.
@propertyWrapper
struct OptionalRow: Sendable {
    private var row: Int32 = -1

    init(wrappedValue: Int?) {
        self.wrappedValue = wrappedValue
    }

    var wrappedValue: Int? {
        get { row < 0 ? nil : Int(row) }
        set {
            precondition(newValue.map { $0 >= 0 && $0 <= Int(Int32.max) } ?? true, "row out of range")
            row = newValue.map(Int32.init) ?? -1
        }
    }
}
