import AccessoryModel

/// A request to change the person's controls of an accessory (`AccessoryControls`), from home automation.
public struct ControlsRequest: Hashable, Sendable {
    /// Echoed in the answer.
    public var requestID: String
    public var controls: AccessoryControls

    public init(requestID: String = "", controls: AccessoryControls) {
        self.requestID = requestID
        self.controls = controls
    }
}
