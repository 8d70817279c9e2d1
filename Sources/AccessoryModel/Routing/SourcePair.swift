/// The audio sources an accessory is connected to: none, a primary, or a primary and a secondary.
///
/// A collection without heap storage, because the routing engine builds one for every accessory change, in 16 bytes
/// (two optional addresses would take 32), because the engine keeps two for every accessory.
public struct SourcePair: RandomAccessCollection, Hashable, Sendable, ExpressibleByArrayLiteral,
    CustomStringConvertible
{
    /// Each address's 48 bits, or ``none``: an address never has higher bits set.
    private var first: UInt64
    private var second: UInt64
    private static let none = UInt64.max

    public var primary: BluetoothAddress? { BluetoothAddress(rawValue: first) }
    public var secondary: BluetoothAddress? { BluetoothAddress(rawValue: second) }

    /// The sources in order; a secondary without a primary becomes the primary.
    public init(primary: BluetoothAddress?, secondary: BluetoothAddress?) {
        let (primary, secondary) = primary == nil ? (secondary, nil) : (primary, secondary)
        first = primary?.rawValue ?? Self.none
        second = secondary?.rawValue ?? Self.none
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
    public var endIndex: Int { first == Self.none ? 0 : second == Self.none ? 1 : 2 }

    public subscript(position: Int) -> BluetoothAddress {
        precondition(position >= 0 && position < endIndex, "index out of range")
        return BluetoothAddress(rawValue: position == 0 ? first : second)!
    }

    public func contains(_ source: BluetoothAddress) -> Bool {
        first == source.rawValue || second == source.rawValue
    }

    public var description: String { "[" + map(\.description).joined(separator: ", ") + "]" }
}
