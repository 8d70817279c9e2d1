import AccessoryModel
import SwiftProtobuf

/// The binary protobuf encoding of the two messages the bridge sends for every telemetry message, AccessoryState
/// and RequestResult, byte for byte what swift-protobuf's `serializedBytes()` gives, in a fraction of the time.
///
/// Why it exists: swift-protobuf 1.39 encodes packed enum fields through unspecialized generic code that looks up
/// type metadata on every call, about 200 ns per field and pass; AccessoryState has two such fields (the hardware
/// and registered capabilities), each visited twice (size, then bytes), which made up 80% of its encoding time.
/// Capabilities take only four values, so their encoded fields are computed once, by swift-protobuf, and the rest
/// of the message is encoded by swift-protobuf in pieces laid out in field-number order: head (fields 1–5),
/// hardware capabilities (6), configuration (7: registered capabilities, then the rest), tail (8–12). The result is
/// the canonical encoding; StateEncoderTests compares it with swift-protobuf's over many random states.
///
/// JSON payloads do not come through here: they are built from the full messages.
public enum StateEncoder {
    /// `AccessoryState.hardware_capabilities` (field 6) for each capability combination, indexed by raw value.
    private static let hardwareCapabilityFields: [[UInt8]] = (0..<4).map { raw in
        try! Audioaccessory_V1_AccessoryState.with {
            $0.hardwareCapabilities = .init(Capabilities(rawValue: UInt32(raw)))
        }.serializedBytes()
    }

    /// `Configuration.device_capabilities` (field 1) for each capability combination, indexed by raw value.
    private static let deviceCapabilityFields: [[UInt8]] = (0..<4).map { raw in
        try! Audioaccessory_V1_Configuration.with {
            $0.deviceCapabilities = .init(Capabilities(rawValue: UInt32(raw)))
        }.serializedBytes()
    }

    /// The key of a length-delimited field: its number, and wire type 2.
    private static func lengthDelimitedKey(_ fieldNumber: UInt8) -> UInt8 { fieldNumber << 3 | 2 }

    /// `Audioaccessory_V1_AccessoryState(accessory, routedSource:).serializedBytes()`.
    public static func encodeState(_ accessory: Accessory, routedSource: BluetoothAddress?) -> [UInt8] {
        var head = Audioaccessory_V1_AccessoryState()
        head.accessoryID = accessory.id.rawValue
        head.hubID = accessory.hub.rawValue
        head.registration = .init(accessory.registration)
        head.name = accessory.name
        head.model = accessory.model

        let configuration = accessory.configuration
        var rest = Audioaccessory_V1_Configuration()
        rest.devicePlacement = .init(configuration.devicePlacement)
        if let primary = configuration.primaryAudioSourceDeviceIdentifier {
            rest.primaryAudioSourceDeviceIdentifier = primary
        }
        if let secondary = configuration.secondaryAudioSourceDeviceIdentifier {
            rest.secondaryAudioSourceDeviceIdentifier = secondary
        }

        var tail = Audioaccessory_V1_AccessoryState()
        if let routedSource {
            tail.routedSource = routedSource.data
        }
        tail.lastSequence = accessory.lastSequence
        tail.updatedAtUnixMs = accessory.updatedAt.unixMilliseconds
        tail.stale = accessory.isStale
        if !accessory.diagnostics.isEmpty {
            tail.diagnostics = accessory.diagnostics.map(\.description)
        }

        let capabilities = deviceCapabilityFields[index(configuration.deviceCapabilities)]
        let restBytes: [UInt8] = try! rest.serializedBytes()
        var bytes: [UInt8] = try! head.serializedBytes()
        bytes.reserveCapacity(bytes.count + 80 + restBytes.count)
        bytes += hardwareCapabilityFields[index(accessory.hardwareCapabilities)]
        bytes.append(lengthDelimitedKey(7))
        appendVarint(capabilities.count + restBytes.count, to: &bytes)
        bytes += capabilities
        bytes += restBytes
        bytes += try! tail.serializedBytes() as [UInt8]
        return bytes
    }

    /// `Audioaccessory_V1_RequestResult(requestID:sequence:error:state:).serializedBytes()`, given the state's bytes
    /// from ``encodeState(_:routedSource:)`` (or `nil` for no state).
    public static func encodeResult(
        requestID: String, sequence: UInt64, error: AccessoryControlError?, state: [UInt8]?
    ) -> [UInt8] {
        let result = Audioaccessory_V1_RequestResult(requestID: requestID, sequence: sequence, error: error, state: nil)
        var bytes: [UInt8] = try! result.serializedBytes()
        if let state {
            bytes.reserveCapacity(bytes.count + state.count + 4)
            bytes.append(lengthDelimitedKey(5))
            appendVarint(state.count, to: &bytes)
            bytes += state
        }
        return bytes
    }

    private static func index(_ capabilities: Capabilities) -> Int {
        Int(capabilities.intersection(.all).rawValue)
    }

    private static func appendVarint(_ value: Int, to bytes: inout [UInt8]) {
        var value = UInt64(value)
        while value >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: value) | 0x80)
            value >>= 7
        }
        bytes.append(UInt8(value))
    }
}
