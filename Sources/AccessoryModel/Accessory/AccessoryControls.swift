/// The person's own controls of an accessory, beside what its hub reports: AudioAccessoryKit's "automatic" (the
/// bridge switches audio for it) versus "when last connected" (it never does on its own), and a source pinned to it.
/// `nil` leaves a control as it is.
public struct AccessoryControls: Hashable, Sendable {
    /// Which sources may be routed to the accessory.
    public enum Pin: Hashable, Sendable {
        /// Any of its sources (no pin).
        case automatic
        /// Only this one.
        case source(BluetoothAddress)
    }

    public var automaticSwitching: Bool?
    public var pin: Pin?

    public init(automaticSwitching: Bool? = nil, pin: Pin? = nil) {
        self.automaticSwitching = automaticSwitching
        self.pin = pin
    }
}
