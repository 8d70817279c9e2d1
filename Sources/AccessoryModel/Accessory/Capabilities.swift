/// What an accessory can do: AudioAccessoryKit's `AccessoryControlDevice.Capabilities`. Bits this version does not
/// know (a later version's capabilities) are kept and shown, never dropped: the wire's capability `n` is bit `n - 1`.
public struct Capabilities: OptionSet, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt32

    public init(rawValue: UInt32) {
        self.rawValue = rawValue
    }

    /// The accessory supports automatic audio switching.
    public static let audioSwitching = Capabilities(rawValue: 1 << 0)
    /// The accessory reports its placement.
    public static let placement = Capabilities(rawValue: 1 << 1)
    /// The accessory supports audio spatialization (iOS 27): its configuration may name its spatial rendering
    /// extension (``Configuration/spatialExtensionDescription``).
    public static let audioSpatialization = Capabilities(rawValue: 1 << 2)
    /// The accessory supports head tracking for audio spatialization (iOS 27): worn and routed, it has a
    /// head-tracking session with the playing device (routing rule 13).
    public static let headTracking = Capabilities(rawValue: 1 << 3)

    /// Every capability this model knows.
    public static let all: Capabilities = [.audioSwitching, .placement, .audioSpatialization, .headTracking]

    /// The known capabilities, in declaration order.
    public static let known: [(capability: Capabilities, name: String)] = [
        (.audioSwitching, "audioSwitching"), (.placement, "placement"), (.audioSpatialization, "audioSpatialization"),
        (.headTracking, "headTracking"),
    ]

    /// The bits this version does not know.
    public var unknown: Capabilities { subtracting(.all) }

    /// `[.audioSwitching, .placement]`, as a person would write it in Swift.
    public var description: String {
        let names = Self.known.filter { contains($0.capability) }.map { "." + $0.name }
        let unknown = subtracting(.all)
        return "[" + (names + (unknown.isEmpty ? [] : ["rawValue: \(unknown.rawValue)"])).joined(separator: ", ") + "]"
    }
}
