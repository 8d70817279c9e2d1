@testable import AccessoryWire
import Foundation
import SwiftProtobuf

/// One fully populated message of every wire type, for tests that need realistic payloads.
///
/// Every field of every sample holds a non-default value (so that a field a decoder drops or
/// misreads changes the result), repeated fields hold two elements, Bluetooth addresses are
/// 6-byte `Data`, and the values include edge cases: `UInt64.max` and 2⁶³, a negative `Int64`
/// (a 10-byte varint), non-ASCII UTF-8 (Latin-1, an em dash, an emoji outside the BMP) and the
/// characters JSON must escape (quote, backslash, tab).
///
/// The golden files `Vectors/<name>.binpb` hold the Swift encoding of each sample, and the C
/// fixtures (`cwf_pack_sample` in Tests/CWireFixtures/fixtures.c) build the same values
/// independently with protobuf-c: a change here must be made there too (GoldenVectorTests fails
/// otherwise), followed by `make vectors`.
enum WireSamples {
    /// Bluetooth address 12:34:56:78:9A:BC.
    static let addressA = Data([0x12, 0x34, 0x56, 0x78, 0x9A, 0xBC])
    /// Bluetooth address DE:F0:01:23:45:67.
    static let addressB = Data([0xDE, 0xF0, 0x01, 0x23, 0x45, 0x67])
    /// Bluetooth address A1:B2:C3:D4:E5:F6.
    static let addressC = Data([0xA1, 0xB2, 0xC3, 0xD4, 0xE5, 0xF6])

    /// The accessory every sample is about.
    static let accessoryID = "acc-7f3a"

    /// A head-tracking session's id: 16 bytes.
    static let sessionID = Data([
        0x0F, 0x3C, 0x9A, 0x11, 0x80, 0x00, 0x7E, 0xFF, 0x01, 0x23, 0x45, 0x67, 0x89, 0xAB, 0xCD, 0xEF,
    ])

    /// Apple's example of a spatial rendering extension, with flags and a full mask.
    static let spatialExtension = Audioaccessory_V1_AudioComponentDescription.with {
        $0.componentType = 0xaaf
        $0.componentSubType = 0xc0f
        $0.componentManufacturer = 0xb05e
        $0.componentFlags = 1
        $0.componentFlagsMask = .max
    }

    // MARK: Hub -> bridge: AccessoryTelemetry, one sample per member of its `event` oneof

    /// `AccessoryTelemetry` with `paired`; its sequence is `UInt64.max` and the name needs JSON escapes.
    static let telemetryPaired = Audioaccessory_V1_AccessoryTelemetry.with {
        $0.sequence = .max
        $0.requestID = "req-0001"
        $0.accessoryID = accessoryID
        $0.paired = .with {
            $0.name = "Léa's \"Studio\" \\ Kopfhörer\t🎧"
            $0.model = "AAB-200"
            $0.hardwareCapabilities = [.audioSwitching, .placement]
        }
    }

    /// `AccessoryTelemetry` with `unpaired` (an empty message, present as a set oneof member).
    static let telemetryUnpaired = Audioaccessory_V1_AccessoryTelemetry.with {
        $0.sequence = 42
        $0.requestID = "req-0002"
        $0.accessoryID = accessoryID
        $0.unpaired = Audioaccessory_V1_Unpaired()
    }

    /// `AccessoryTelemetry` with `register`, capabilities in descending order.
    static let telemetryRegister = Audioaccessory_V1_AccessoryTelemetry.with {
        $0.sequence = 43
        $0.requestID = "req-0003"
        $0.accessoryID = accessoryID
        $0.register = .with {
            $0.capabilities = [.headTracking, .audioSpatialization]
            $0.spatialExtensionDescription = spatialExtension
        }
    }

    /// `AccessoryTelemetry` with `update`, a full configuration.
    static let telemetryUpdate = Audioaccessory_V1_AccessoryTelemetry.with {
        $0.sequence = 44
        $0.requestID = "req-0004"
        $0.accessoryID = accessoryID
        $0.update = .with {
            $0.deviceCapabilities = [.audioSwitching, .placement]
            $0.devicePlacement = .overTheEar
            $0.primaryAudioSourceDeviceIdentifier = addressA
            $0.secondaryAudioSourceDeviceIdentifier = addressB
            $0.spatialExtensionDescription = spatialExtension
        }
    }

    /// `AccessoryTelemetry` with `placement`.
    static let telemetryPlacement = Audioaccessory_V1_AccessoryTelemetry.with {
        $0.sequence = 45
        $0.requestID = "req-0005"
        $0.accessoryID = accessoryID
        $0.placement = .with { $0.placement = .offHead }
    }

    /// `AccessoryTelemetry` with `sources`.
    static let telemetrySources = Audioaccessory_V1_AccessoryTelemetry.with {
        $0.sequence = 46
        $0.requestID = "req-0006"
        $0.accessoryID = accessoryID
        $0.sources = .with {
            $0.primary = addressB
            $0.secondary = addressC
        }
    }

    // MARK: Shared types

    /// A `Configuration` on its own.
    static let configuration = Audioaccessory_V1_Configuration.with {
        $0.deviceCapabilities = [.placement, .audioSwitching]
        $0.devicePlacement = .inEar
        $0.primaryAudioSourceDeviceIdentifier = addressB
        $0.secondaryAudioSourceDeviceIdentifier = addressC
        $0.spatialExtensionDescription = spatialExtension
    }

    // MARK: Bridge -> hubs and everyone

    /// A failed `RequestResult` (sequence 2⁶³) carrying `accessoryState`.
    static let requestResult = Audioaccessory_V1_RequestResult.with {
        $0.requestID = "req-0004"
        $0.sequence = 1 << 63
        $0.error = .invalidated
        $0.message = "Registrierung ungültig: erneut registrieren"
        $0.state = accessoryState
        $0.duplicate = true
        $0.epoch = 4242
    }

    /// A stale, registered `AccessoryState` with a configuration and two diagnostics.
    static let accessoryState = Audioaccessory_V1_AccessoryState.with {
        $0.accessoryID = accessoryID
        $0.hubID = "hub-küche"
        $0.registration = .registered
        $0.name = "Kopfhörer Pro"
        $0.model = "AAB-200"
        $0.hardwareCapabilities = [.audioSwitching, .placement]
        $0.configuration = .with {
            $0.deviceCapabilities = [.audioSwitching, .placement]
            $0.devicePlacement = .onHead
            $0.primaryAudioSourceDeviceIdentifier = addressA
            $0.secondaryAudioSourceDeviceIdentifier = addressB
            $0.spatialExtensionDescription = spatialExtension
        }
        $0.routedSource = addressA
        $0.lastSequence = .max
        $0.updatedAtUnixMs = 1_763_790_000_123
        $0.stale = true
        $0.diagnostics = [
            "hub clock is 3 s ahead of the bridge",
            "secondary source without a primary — ignored",
        ]
        $0.lastError = .accessoryNotCapable
        $0.lastErrorMessage = "placement .onHead needs the .placement capability"
        $0.automaticSwitchingOff = true
        $0.pinnedSource = addressB
        $0.epoch = 4242
        $0.headTracking = headTrackingSession
    }

    // MARK: Bridge <-> playing devices

    /// A `SourceState` of a device playing media.
    static let sourceState = Audioaccessory_V1_SourceState.with {
        $0.sequence = 7
        $0.activity = .media
        $0.routedAccessoryID = accessoryID
        $0.lastCommandSequence = 1_763_790_000_123_004
        $0.lastCommandEpoch = 4242
        $0.headTracking = .on
    }

    // MARK: Head tracking (iOS 27)

    /// A `HeadTrackingSession` whose host's setting changed; its sequence is `UInt64.max`.
    static let headTrackingSession = Audioaccessory_V1_HeadTrackingSession.with {
        $0.accessoryID = accessoryID
        $0.sessionID = sessionID
        $0.event = .stateChanged
        $0.host = addressC
        $0.headTrackingActive = true
        $0.restorationID = "aab:acc-7f3a"
        $0.epoch = 4242
        $0.sequence = .max
        $0.reason = .switchChanged
        $0.issuedAtUnixMs = 1_763_790_000_123
        $0.hubID = "hub-küche"
    }

    /// A `HeadTrackingFrame`: 13 bytes of IMU data (a rotation vector, an angular velocity and a discontinuity
    /// count, as Android's head-tracker report), sent at a negative time (a 10-byte varint).
    static let headTrackingFrame = Audioaccessory_V1_HeadTrackingFrame.with {
        $0.sessionID = sessionID
        $0.sequence = 1 << 63
        $0.sentAtUnixUs = -62_135_596_800_000_000
        $0.data = Data([0x00, 0x7F, 0x80, 0xFF, 0x12, 0x34, 0x56, 0x78, 0x9A, 0xBC, 0xDE, 0xF0, 0x01])
    }

    /// A `SwitchCommand` routing a source that became active.
    static let switchCommand = Audioaccessory_V1_SwitchCommand.with {
        $0.commandID = "cmd-9c1e"
        $0.sequence = 8
        $0.accessoryID = accessoryID
        $0.action = .routeToAccessory
        $0.reason = .interruptionEnded
        $0.issuedAtUnixMs = 1_763_790_000_123
        $0.epoch = 4243
    }

    // MARK: Home automation -> bridge

    /// An `AccessoryControls` turning automatic switching off and pinning a source.
    static let accessoryControls = Audioaccessory_V1_AccessoryControls.with {
        $0.switching = .off
        $0.pinnedSource = "DE:F0:01:23:45:67"
        $0.requestID = "ha-0001"
    }

    // MARK: Birth and death certificates

    /// A `HubStatus` whose `sinceUnixMs` is negative (0001-01-01T00:00:00Z), a 10-byte varint.
    static let hubStatus = Audioaccessory_V1_HubStatus.with {
        $0.online = true
        $0.sinceUnixMs = -62_135_596_800_000
    }

    /// A `BridgeStatus` of a bridge online.
    static let bridgeStatus = Audioaccessory_V1_BridgeStatus.with {
        $0.online = true
        $0.version = "1.4.0-beta.2"
        $0.sinceUnixMs = 1_763_790_000_123
    }

    /// A `BridgeLayout` of a cluster of 4,096 slots (the most: a two-byte varint).
    static let bridgeLayout = Audioaccessory_V1_BridgeLayout.with {
        $0.slots = 4096
        $0.version = "1.4.0-beta.2"
    }

    /// A `RebirthRequest`, bridge -> hub, after a gap; its received sequence is 2⁶³.
    static let rebirthRequest = Audioaccessory_V1_RebirthRequest.with {
        $0.accessoryID = accessoryID
        $0.lastSequence = 41
        $0.receivedSequence = 1 << 63
        $0.reason = "sequence 43 follows 41: 1 message missing \u{2014} send everything again"
    }

    // MARK: Every sample

    /// Every sample under a stable name (the golden file is `Vectors/<name>.binpb`, and C knows the
    /// sample by the same name), in a fixed order.
    static let all: [(name: String, message: any SwiftProtobuf.Message)] = [
        ("telemetry_paired", telemetryPaired),
        ("telemetry_unpaired", telemetryUnpaired),
        ("telemetry_register", telemetryRegister),
        ("telemetry_update", telemetryUpdate),
        ("telemetry_placement", telemetryPlacement),
        ("telemetry_sources", telemetrySources),
        ("configuration", configuration),
        ("request_result", requestResult),
        ("accessory_state", accessoryState),
        ("source_state", sourceState),
        ("switch_command", switchCommand),
        ("hub_status", hubStatus),
        ("bridge_status", bridgeStatus),
        ("bridge_layout", bridgeLayout),
        ("rebirth_request", rebirthRequest),
        ("accessory_controls", accessoryControls),
        ("head_tracking_session", headTrackingSession),
        ("head_tracking_frame", headTrackingFrame),
    ]

    /// The sample called `name`, or nil.
    static func sample(named name: String) -> (any SwiftProtobuf.Message)? {
        all.first { $0.name == name }?.message
    }
}
