import AccessoryModel
import SwiftProtobuf

/// The binary protobuf encoding of what the bridge sends for a telemetry message (the AccessoryState, the
/// RequestResult carrying it, and SwitchCommands), byte for byte what swift-protobuf's `serializedBytes()` gives, in a
/// fraction of the time.
///
/// Why it exists: swift-protobuf 1.39 walks a message twice (size, then bytes) through a generic visitor, about
/// 25 ns per field, and encodes packed enum fields through unspecialized generic code, about 200 ns each. These
/// messages go out for every telemetry message, so they are written here field by field with ``ProtobufWriter``, in
/// field-number order, defaults skipped: the canonical encoding. The packed capability fields are taken from tables
/// that swift-protobuf itself encoded. OutboundEncoderTests compares every byte with swift-protobuf's over many
/// random messages. Its inbound counterpart is ``WireCodec/readTelemetry(from:format:for:)``; every other message is
/// encoded and decoded by swift-protobuf.
///
/// JSON payloads do not come through here: they are built from the full messages.
public enum OutboundEncoder {
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

    /// `Audioaccessory_V1_AccessoryState(accessory, routedSource:).serializedBytes()`.
    public static func encodeState(_ accessory: Accessory, routedSource: BluetoothAddress?) -> [UInt8] {
        let diagnostics = accessory.diagnostics.map { $0.description }
        // 16 fields at most besides the diagnostics (the configuration's included), the capability tables (8 bytes
        // each at most), the address, and the texts.
        let bound =
            ProtobufWriter.fieldOverhead * (16 + diagnostics.count) + 2 * 8 + 6
            + accessory.id.rawValue.utf8.count + accessory.hub.rawValue.utf8.count + accessory.name.utf8.count
            + accessory.model.utf8.count + (accessory.configuration.primaryAudioSourceDeviceIdentifier?.count ?? 0)
            + (accessory.configuration.secondaryAudioSourceDeviceIdentifier?.count ?? 0)
            + diagnostics.reduce(0) { $0 + $1.utf8.count } + ProtobufWriter.fieldOverhead * 2
            + (accessory.lastError?.reason.utf8.count ?? 0)
        return ProtobufWriter.write(bound: bound) { writer in
            writer.string(1, accessory.id.rawValue)
            writer.string(2, accessory.hub.rawValue)
            writer.enumeration(3, Audioaccessory_V1_Registration(accessory.registration))
            writer.string(4, accessory.name)
            writer.string(5, accessory.model)
            writer.raw(hardwareCapabilityFields[index(accessory.hardwareCapabilities)])
            writer.message(7) { writer in
                writer.raw(deviceCapabilityFields[index(accessory.configuration.deviceCapabilities)])
                writer.enumeration(2, Audioaccessory_V1_Placement(accessory.configuration.devicePlacement))
                if let primary = accessory.configuration.primaryAudioSourceDeviceIdentifier { writer.bytes(3, primary) }
                if let secondary = accessory.configuration.secondaryAudioSourceDeviceIdentifier {
                    writer.bytes(4, secondary)
                }
            }
            if let routedSource { writer.address(8, routedSource.rawValue) }
            writer.uint64(9, accessory.lastSequence)
            writer.int64(10, accessory.updatedAt.unixMilliseconds)
            writer.bool(11, accessory.isStale)
            for diagnostic in diagnostics { writer.element(12, diagnostic) }
            if accessory.lastSequence != 0 {
                writer.enumeration(13, Audioaccessory_V1_ErrorCode(accessory.lastError?.code))
                if let error = accessory.lastError { writer.string(14, error.reason) }
            }
        }
    }

    /// `Audioaccessory_V1_RequestResult(requestID:sequence:error:state:).serializedBytes()`, given the state's bytes
    /// from ``encodeState(_:routedSource:)`` (or `nil` for no state).
    public static func encodeResult(
        requestID: String, sequence: UInt64, error: AccessoryControlError?, state: [UInt8]?
    ) -> [UInt8] {
        let bound =
            ProtobufWriter.fieldOverhead * 5 + requestID.utf8.count + (error?.reason.utf8.count ?? 0)
            + (state?.count ?? 0)
        return ProtobufWriter.write(bound: bound) { writer in
            writer.string(1, requestID)
            writer.uint64(2, sequence)
            writer.enumeration(3, Audioaccessory_V1_ErrorCode(error?.code))  // NONE on success
            if let error { writer.string(4, error.reason) }
            if let state { writer.message(5, encoded: state) }
        }
    }

    /// `Audioaccessory_V1_SwitchCommand(command).serializedBytes()`.
    public static func encodeCommand(_ command: SwitchCommand) -> [UInt8] {
        let bound = ProtobufWriter.fieldOverhead * 6 + command.id.utf8.count + command.accessoryID.rawValue.utf8.count
        return ProtobufWriter.write(bound: bound) { writer in
            writer.string(1, command.id)
            writer.uint64(2, command.sequence)
            writer.string(3, command.accessoryID.rawValue)
            writer.enumeration(4, Audioaccessory_V1_Action(command.action))
            writer.enumeration(5, Audioaccessory_V1_Reason(command.reason))
            writer.int64(6, command.issuedAt.unixMilliseconds)
        }
    }

    private static func index(_ capabilities: Capabilities) -> Int {
        Int(capabilities.intersection(.all).rawValue)
    }
}
