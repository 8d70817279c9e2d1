import AccessoryModel

/// An accessory state encoded once, in one format: published as the retained state, and embedded as it is in the
/// result of the request that changed it (``WireCodec/encode(_:as:embedding:)``).
public struct EncodedState: Sendable {
    public let state: AccessoryState
    public let format: PayloadFormat
    public let bytes: [UInt8]
}
