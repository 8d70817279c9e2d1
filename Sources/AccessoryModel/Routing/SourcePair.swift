/// The audio sources an accessory is connected to: none, a primary, or a primary and a secondary.
///
/// A collection without heap storage, because the routing engine builds one for every accessory change.
public struct SourcePair: RandomAccessCollection, Hashable, Sendable, ExpressibleByArrayLiteral,
    CustomStringConvertible
{
    public private(set) var primary: BluetoothAddress?
    public private(set) var secondary: BluetoothAddress?

    /// The sources in order; a secondary without a primary becomes the primary.
    public init(primary: BluetoothAddress?, secondary: BluetoothAddress?) {
        self.primary = primary ?? secondary
        self.secondary = primary == nil ? nil : secondary
    }

    /// The first two of `sources`.
    public init(_ sources: some Sequence<BluetoothAddress>) {
        var iterator = sources.makeIterator()
        self.init(primary: iterator.next(), secondary: iterator.next())
    }

    public init(arrayLiteral elements: BluetoothAddress...) {
        precondition(elements.count <= 2, "an accessory has at most two audio sources")
        self.init(elements)
    }

    public var startIndex: Int { 0 }
    public var endIndex: Int { primary == nil ? 0 : secondary == nil ? 1 : 2 }

    public subscript(position: Int) -> BluetoothAddress {
        precondition(position >= 0 && position < endIndex, "index out of range")
        return position == 0 ? primary! : secondary!
    }

    public func contains(_ source: BluetoothAddress) -> Bool {
        primary == source || secondary == source
    }

    public var description: String { "[" + map(\.description).joined(separator: ", ") + "]" }
}
