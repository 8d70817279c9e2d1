import AccessoryModel
import SwiftProtobuf

/// The binary protobuf of the three messages the bridge sends for each telemetry message (the AccessoryState, the
/// RequestResult carrying it, a SwitchCommand): byte for byte what swift-protobuf writes for the messages the mapping
/// layer builds, in a fraction of the time.
///
/// Why it exists: swift-protobuf 1.39 walks a message twice (size, then bytes) through a visitor that is generic at
/// run time, sizes a nested message again at each level it is nested in, and packs enum fields through
/// unspecialized generic code, which made encoding the state alone a large share of the pipeline
/// (docs/performance-history.md, "OutboundEncoder"). Here each field is written once, in field-number order, defaults skipped: the canonical
/// encoding. The packed capability fields come from tables swift-protobuf encoded itself. OutboundEncoderTests
/// compares every byte with swift-protobuf's over many random messages.
///
/// JSON does not come through here, nor does any other message: those are built and encoded by swift-protobuf.
enum OutboundEncoder {
    /// `AccessoryState.hardware_capabilities` (field 6) for each combination of known capabilities, by raw value.
    private static let hardwareCapabilityFields: [[UInt8]] = (0..<(1 << Capabilities.known.count)).map { raw in
        hardwareCapabilityField(Capabilities(rawValue: UInt32(raw)))
    }

    /// `Configuration.device_capabilities` (field 1) for each combination of known capabilities, by raw value.
    private static let deviceCapabilityFields: [[UInt8]] = (0..<(1 << Capabilities.known.count)).map { raw in
        deviceCapabilityField(Capabilities(rawValue: UInt32(raw)))
    }

    private static func hardwareCapabilityField(_ capabilities: Capabilities) -> [UInt8] {
        try! Audioaccessory_V1_AccessoryState.with { $0.hardwareCapabilities = .init(capabilities) }.serializedBytes()
    }

    private static func deviceCapabilityField(_ capabilities: Capabilities) -> [UInt8] {
        try! Audioaccessory_V1_Configuration.with { $0.deviceCapabilities = .init(capabilities) }.serializedBytes()
    }

    /// `Audioaccessory_V1_AccessoryState(state)`'s bytes.
    static func encode(_ state: AccessoryState) -> [UInt8] {
        let accessory = state.accessory
        let configuration = accessory.configuration
        var writer = ProtobufWriter(capacity: 128 + accessory.name.utf8.count + accessory.model.utf8.count)
        writer.string(1, accessory.id.rawValue)
        writer.string(2, accessory.hub.rawValue)
        writer.enumeration(3, Audioaccessory_V1_Registration(accessory.registration))
        writer.string(4, accessory.name)
        writer.string(5, accessory.model)
        // A later version's capabilities (rare) go through swift-protobuf; the known ones come from the tables.
        let hardware = accessory.hardwareCapabilities
        writer.raw(hardware.unknown.isEmpty ? hardwareCapabilityFields[index(hardware)] : hardwareCapabilityField(hardware))
        writer.message(7) { writer in
            let device = configuration.deviceCapabilities
            writer.raw(device.unknown.isEmpty ? deviceCapabilityFields[index(device)] : deviceCapabilityField(device))
            writer.enumeration(2, Audioaccessory_V1_Placement(configuration.devicePlacement))
            if let primary = configuration.primaryAudioSourceDeviceIdentifier { writer.bytes(3, primary) }
            if let secondary = configuration.secondaryAudioSourceDeviceIdentifier { writer.bytes(4, secondary) }
            if let description = configuration.spatialExtensionDescription {
                writer.message(5, encoded: try! Audioaccessory_V1_AudioComponentDescription(description).serializedBytes() as [UInt8])
            }
        }
        writer.address(8, state.routedSource)
        writer.uint64(9, accessory.lastSequence)
        writer.int64(10, accessory.updatedAt.unixMilliseconds)
        writer.bool(11, accessory.isStale)
        for diagnostic in accessory.diagnostics { writer.element(12, diagnostic.description) }
        if accessory.lastSequence != 0 {
            writer.enumeration(13, Audioaccessory_V1_ErrorCode(accessory.lastError?.code))
            if let error = accessory.lastError { writer.string(14, error.reason) }
        }
        writer.bool(15, !accessory.automaticSwitching)
        writer.address(16, accessory.pinnedSource)
        writer.uint64(17, state.epoch)
        if let session = state.headTracking {
            // Only the accessories with a head-tracking session: swift-protobuf writes it.
            let news = Audioaccessory_V1_HeadTrackingSession(
                HeadTrackingEvent(.activated, session, reason: .routed, at: accessory.updatedAt), hub: accessory.hub)
            writer.message(18, encoded: try! news.serializedBytes() as [UInt8])
        }
        return writer.bytes
    }

    /// `Audioaccessory_V1_RequestResult(result)`'s bytes, its state (if any) given as the state's encoding wrote it.
    static func encode(_ result: RequestResult, state: [UInt8]?) -> [UInt8] {
        var writer = ProtobufWriter(capacity: 32 + result.requestID.utf8.count + (state?.count ?? 0))
        writer.string(1, result.requestID)
        writer.uint64(2, result.sequence)
        switch result.outcome {
        case .succeeded:
            writer.enumeration(3, Audioaccessory_V1_ErrorCode.none)
        case .failed(let error):
            writer.enumeration(3, Audioaccessory_V1_ErrorCode(error.code))
            writer.string(4, error.reason)
        case .notKept(let reason):
            // error UNSPECIFIED: the default, not written.
            writer.string(4, reason)
        }
        if let state { writer.message(5, encoded: state) }
        writer.bool(6, result.duplicate)
        writer.uint64(7, result.epoch)
        return writer.bytes
    }

    /// `Audioaccessory_V1_SwitchCommand(command)`'s bytes.
    static func encode(_ command: SwitchCommand) -> [UInt8] {
        var writer = ProtobufWriter(capacity: 48 + command.id.utf8.count + command.accessoryID.rawValue.utf8.count)
        writer.string(1, command.id)
        writer.uint64(2, command.sequence)
        writer.string(3, command.accessoryID.rawValue)
        writer.enumeration(4, Audioaccessory_V1_Action(command.action))
        writer.enumeration(5, Audioaccessory_V1_Reason(command.reason))
        writer.int64(6, command.issuedAt.unixMilliseconds)
        writer.uint64(7, command.epoch)
        return writer.bytes
    }

    private static func index(_ capabilities: Capabilities) -> Int {
        Int(capabilities.intersection(.all).rawValue)
    }
}
