/// What identifies an audio component: AudioToolbox's `AudioComponentDescription`, which iOS 27's
/// `AccessoryControlDevice.Configuration.spatialExtensionDescription` uses to name an accessory's spatial audio
/// rendering extension (only with ``Capabilities/audioSpatialization``).
public struct AudioComponentDescription: Hashable, Sendable, CustomStringConvertible {
    public var componentType: UInt32
    public var componentSubType: UInt32
    public var componentManufacturer: UInt32
    public var componentFlags: UInt32
    public var componentFlagsMask: UInt32

    public init(
        componentType: UInt32, componentSubType: UInt32, componentManufacturer: UInt32, componentFlags: UInt32 = 0,
        componentFlagsMask: UInt32 = 0
    ) {
        self.componentType = componentType
        self.componentSubType = componentSubType
        self.componentManufacturer = componentManufacturer
        self.componentFlags = componentFlags
        self.componentFlagsMask = componentFlagsMask
    }

    /// `type 0xaaf, subtype 0xc0f, manufacturer 0xb05e, flags 0x0, mask 0x0`.
    public var description: String {
        func hex(_ value: UInt32) -> String { "0x" + String(value, radix: 16) }
        return "type \(hex(componentType)), subtype \(hex(componentSubType)), manufacturer "
            + "\(hex(componentManufacturer)), flags \(hex(componentFlags)), mask \(hex(componentFlagsMask))"
    }
}
