/// The slots that list a device, as its lister and shared keys hold them: `3,7`.
public struct ListerSlots: Hashable, Sendable, CustomStringConvertible {
    public var slots: Set<Int>

    public init(_ slots: Set<Int>) {
        self.slots = slots
    }

    /// Reads a key's value; what is not a slot number is skipped.
    public init(parsing value: String) {
        slots = Set(value.split(separator: ",").compactMap { Int($0) })
    }

    public var description: String { slots.sorted().map(String.init).joined(separator: ",") }
}
