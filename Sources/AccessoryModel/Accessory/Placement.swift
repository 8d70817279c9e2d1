/// Where an accessory is: AudioAccessoryKit's `AccessoryControlDevice.Placement`.
public enum Placement: Hashable, Sendable, CaseIterable, CustomStringConvertible {
    case inEar
    case onHead
    case overTheEar
    case offHead

    /// Whether the accessory is being worn: in ear, on head or over the ear.
    public var isWorn: Bool { self != .offHead }

    public var description: String {
        switch self {
        case .inEar: ".inEar"
        case .onHead: ".onHead"
        case .overTheEar: ".overTheEar"
        case .offHead: ".offHead"
        }
    }
}
