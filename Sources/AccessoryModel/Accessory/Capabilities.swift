/// What an accessory can do: AudioAccessoryKit's `AccessoryControlDevice.Capabilities`.
public struct Capabilities: OptionSet, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt32

    public init(rawValue: UInt32) {
        self.rawValue = rawValue
    }

    /// The accessory supports automatic audio switching.
    public static let audioSwitching = Capabilities(rawValue: 1 << 0)
    /// The accessory reports its placement.
    public static let placement = Capabilities(rawValue: 1 << 1)

    /// Every capability this model knows.
    public static let all: Capabilities = [.audioSwitching, .placement]

    /// The known capabilities, in declaration order.
    public static let known: [(capability: Capabilities, name: String)] = [
        (.audioSwitching, "audioSwitching"), (.placement, "placement"),
    ]

    /// `[.audioSwitching, .placement]`, as a person would write it in Swift.
    public var description: String {
        let names = Self.known.filter { contains($0.capability) }.map { "." + $0.name }
        let unknown = subtracting(.all)
        return "[" + (names + (unknown.isEmpty ? [] : ["rawValue: \(unknown.rawValue)"])).joined(separator: ", ") + "]"
    }
}
