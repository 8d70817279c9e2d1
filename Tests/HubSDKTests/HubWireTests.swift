@testable import AccessoryWire
import CAudioHub
import CAudioHubInternal
import Foundation
import SwiftProtobuf
import Testing
import TestSupport

/// Cross-language: the SDK's bytes for each telemetry equal Swift's golden vectors
/// (Tests/AccessoryWireTests/Vectors), and its decoding of the bridge's RequestResult and AccessoryState equals
/// swift-protobuf's, for the golden vectors and for seeded random messages.
@Suite struct HubWireTests {
    static let telemetryVectors = [
        "telemetry_paired", "telemetry_unpaired", "telemetry_register", "telemetry_update", "telemetry_placement",
        "telemetry_sources",
    ]

    static let vectors = RepositoryFiles.url("Tests/AccessoryWireTests/Vectors")

    static func vector(_ name: String) throws -> [UInt8] {
        try [UInt8](Data(contentsOf: vectors.appendingPathComponent("\(name).binpb")))
    }

    // MARK: Telemetry: the SDK's packing

    @Test("The SDK packs each telemetry to the bytes of its Swift golden vector", arguments: telemetryVectors)
    func sdkPacksTheGoldenTelemetry(name: String) throws {
        let golden = try Self.vector(name)
        let telemetry = try Audioaccessory_V1_AccessoryTelemetry(serializedBytes: golden)
        #expect(telemetry.event != nil, "\(name) has an event")
        let packed = try #require(sdkPack(telemetry, capacity: 4096))
        #expect(packed == golden)
        // The SDK refuses a buffer one byte too small rather than truncating.
        #expect(sdkPack(telemetry, capacity: golden.count - 1) == nil)
    }

    @Test("The SDK packs seeded random telemetry to swift-protobuf's bytes")
    func sdkPacksRandomTelemetryLikeSwift() throws {
        var random = SeededGenerator(seed: 0xA0D1_0B0B)
        for round in 0..<500 {
            let telemetry = randomTelemetry(&random)
            let swift: [UInt8] = try telemetry.serializedBytes()
            let packed = try #require(sdkPack(telemetry, capacity: 4096), "round \(round)")
            #expect(packed == swift, "round \(round): \(telemetry.textFormatString())")
        }
    }

    @Test("Capability bits go on the wire ascending: audio switching (1), placement (2), spatialization (3), head tracking (4)")
    func capabilityBitsAreAscending() {
        var values: (Int32, Int32, Int32, Int32) = (0, 0, 0, 0)
        let count = withUnsafeMutableBytes(of: &values) {
            audiohub_internal_capability_values(AUDIOHUB_CAP_ALL, $0.baseAddress!.assumingMemoryBound(to: Int32.self))
        }
        #expect(count == 4 && values == (1, 2, 3, 4))
        let placementOnly = withUnsafeMutableBytes(of: &values) {
            audiohub_internal_capability_values(AUDIOHUB_CAP_PLACEMENT, $0.baseAddress!.assumingMemoryBound(to: Int32.self))
        }
        #expect(placementOnly == 1 && values.0 == 2)
        let headTracking = withUnsafeMutableBytes(of: &values) {
            audiohub_internal_capability_values(
                AUDIOHUB_CAP_AUDIO_SWITCHING | AUDIOHUB_CAP_HEAD_TRACKING,
                $0.baseAddress!.assumingMemoryBound(to: Int32.self))
        }
        #expect(headTracking == 2 && values.0 == 1 && values.1 == 4)
    }

    // MARK: Results and states: the SDK's decoding

    @Test("The SDK decodes the golden RequestResult as swift-protobuf does")
    func sdkDecodesTheGoldenResult() throws {
        let golden = try Self.vector("request_result")
        let swift = try Audioaccessory_V1_RequestResult(serializedBytes: golden)
        let decoded = try #require(sdkDecodeResult(golden))
        #expect(decoded == ResultCopy(swift))
        // Every field of the sample is set, so none can be dropped unnoticed.
        #expect(decoded.duplicate && decoded.state != nil && decoded.state?.diagnostics.count == 2)
    }

    @Test("The SDK decodes the golden AccessoryState as swift-protobuf does")
    func sdkDecodesTheGoldenState() throws {
        let golden = try Self.vector("accessory_state")
        let swift = try Audioaccessory_V1_AccessoryState(serializedBytes: golden)
        let decoded = try #require(sdkDecodeState(golden))
        #expect(decoded == StateCopy(swift))
        #expect(decoded.lastSequence == UInt64.max && decoded.stale && decoded.routedSource.count == 6)
    }

    @Test("The SDK decodes seeded random results and states as swift-protobuf does")
    func sdkDecodesRandomResultsLikeSwift() throws {
        var random = SeededGenerator(seed: 0x5EED_4E5)
        for round in 0..<500 {
            let result = randomResult(&random)
            let bytes: [UInt8] = try result.serializedBytes()
            let decoded = try #require(sdkDecodeResult(bytes), "round \(round)")
            #expect(decoded == ResultCopy(result), "round \(round): \(result.textFormatString())")
            if result.hasState {
                let stateBytes: [UInt8] = try result.state.serializedBytes()
                #expect(sdkDecodeState(stateBytes) == StateCopy(result.state), "round \(round)")
            }
        }
    }

    @Test("The SDK refuses bytes that are not a RequestResult")
    func sdkRefusesMalformedResults() throws {
        let golden = try Self.vector("request_result")
        #expect(sdkDecodeResult(Array(golden.dropLast())) == nil)
        #expect(sdkDecodeResult([0x0A, 0x05, 0x41]) == nil, "a string longer than the bytes")
        #expect(sdkDecodeState(Array(try Self.vector("accessory_state").dropLast())) == nil)
    }

    // MARK: Addresses

    @Test("Addresses parse from text and format back", arguments: [
        ("12:34:56:78:9A:BC", [0x12, 0x34, 0x56, 0x78, 0x9A, 0xBC] as [UInt8]),
        ("de-f0-01-23-45-67", [0xDE, 0xF0, 0x01, 0x23, 0x45, 0x67]),
        ("a1b2c3d4e5f6", [0xA1, 0xB2, 0xC3, 0xD4, 0xE5, 0xF6]),
    ])
    func addressesParse(text: String, expected: [UInt8]) {
        var parsed = audiohub_address()
        #expect(audiohub_address_parse(text, &parsed) == AUDIOHUB_ERR_SUCCESS)
        #expect(bytes(of: parsed) == expected)
        var formatted = [CChar](repeating: 0, count: 18)
        #expect(audiohub_address_format(&parsed, &formatted) == AUDIOHUB_ERR_SUCCESS)
        let text = formatted.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
        #expect(text == expected.map { String(format: "%02X", $0) }.joined(separator: ":"))
    }

    @Test("Malformed addresses are refused", arguments: [
        "12:34:56:78:9A", "12:34:56:78:9A:BC:DE", "12:34:56:78:9A:BG", "12:34-56:78:9A:BC", "", "1234567890abc",
        "12.34.56.78.9A.BC",
    ])
    func malformedAddressesAreRefused(text: String) {
        var parsed = audiohub_address()
        #expect(audiohub_address_parse(text, &parsed) == AUDIOHUB_ERR_ADDRESS)
        var fiveBytes = address([1, 2, 3, 4, 5])
        var formatted = [CChar](repeating: 0, count: 18)
        #expect(audiohub_address_format(&fiveBytes, &formatted) == AUDIOHUB_ERR_ADDRESS)
    }

    @Test("Every error and kit error has a text")
    func everyErrorHasAText() {
        let texts = (0...17).map { String(cString: audiohub_strerror(audiohub_err(rawValue: UInt32($0)))) }
        #expect(Set(texts).count == texts.count, "distinct texts")
        #expect(!texts.contains("unknown error"))
        #expect(String(cString: audiohub_strerror(audiohub_err(rawValue: 999))) == "unknown error")
        let names = (0...5).map { String(cString: audiohub_kit_error_name(audiohub_kit_error(rawValue: UInt32($0)))) }
        #expect(names == ["unspecified", "none", "accessoryNotCapable", "invalidRequest", "invalidated", "unknown"])
    }
}

// MARK: - Calling the SDK's wire code

/// The SDK's packing of `telemetry`, built field by field from the Swift message; nil when it does not fit.
func sdkPack(_ telemetry: Audioaccessory_V1_AccessoryTelemetry, capacity: Int) -> [UInt8]? {
    var strings: [UnsafeMutablePointer<CChar>] = []
    defer { strings.forEach { free($0) } }
    func c(_ text: String) -> UnsafePointer<CChar> {
        let copy = strdup(text)!
        strings.append(copy)
        return UnsafePointer(copy)
    }
    var t = audiohub_internal_telemetry()
    t.sequence = telemetry.sequence
    t.request_id = c(telemetry.requestID)
    t.accessory_id = c(telemetry.accessoryID)
    var capabilities: [Audioaccessory_V1_Capability] = []
    func spatial(_ description: Audioaccessory_V1_AudioComponentDescription?) {
        guard let description else { return }
        t.has_spatial_extension = 1
        t.spatial_extension = (
            description.componentType, description.componentSubType, description.componentManufacturer,
            description.componentFlags, description.componentFlagsMask)
    }
    switch telemetry.event {
    case .paired(let paired):
        t.operation = AUDIOHUB_OP_PAIR
        t.name = c(paired.name)
        t.model = c(paired.model)
        capabilities = paired.hardwareCapabilities
    case .unpaired:
        t.operation = AUDIOHUB_OP_UNPAIR
    case .register(let register):
        t.operation = AUDIOHUB_OP_REGISTER
        capabilities = register.capabilities
        spatial(register.hasSpatialExtensionDescription ? register.spatialExtensionDescription : nil)
    case .update(let configuration):
        t.operation = AUDIOHUB_OP_UPDATE
        capabilities = configuration.deviceCapabilities
        t.placement = audiohub_placement(rawValue: UInt32(configuration.devicePlacement.rawValue))
        t.primary = address([UInt8](configuration.primaryAudioSourceDeviceIdentifier))
        t.secondary = address([UInt8](configuration.secondaryAudioSourceDeviceIdentifier))
        spatial(configuration.hasSpatialExtensionDescription ? configuration.spatialExtensionDescription : nil)
    case .placement(let report):
        t.operation = AUDIOHUB_OP_PLACEMENT
        t.placement = audiohub_placement(rawValue: UInt32(report.placement.rawValue))
    case .sources(let report):
        t.operation = AUDIOHUB_OP_SOURCES
        t.primary = address([UInt8](report.primary))
        t.secondary = address([UInt8](report.secondary))
    case nil:
        return nil
    }
    t.capabilities_count = capabilities.count
    withUnsafeMutableBytes(of: &t.capabilities) { raw in
        let values = raw.bindMemory(to: Int32.self)
        for (index, capability) in capabilities.prefix(values.count).enumerated() {
            values[index] = Int32(capability.rawValue)
        }
    }
    var out = [UInt8](repeating: 0, count: max(capacity, 0))
    let length = audiohub_internal_pack_telemetry(&t, &out, capacity)
    return length == 0 ? nil : Array(out.prefix(length))
}

/// A RequestResult as the SDK's completion shows it.
struct ResultCopy: Equatable {
    var requestID: String
    var sequence: UInt64
    var error: UInt32
    var message: String
    var duplicate: Bool
    var state: StateCopy?
}

private final class Delivered<T>: @unchecked Sendable {
    // @unchecked: written once by a synchronous C callback on this thread, read after it returns.
    var value: T?
}

func sdkDecodeResult(_ bytes: [UInt8]) -> ResultCopy? {
    let delivered = Delivered<ResultCopy>()
    let rc = audiohub_internal_decode_result(bytes, bytes.count, Unmanaged.passUnretained(delivered).toOpaque()) {
        context, result in
        let result = result!.pointee
        Unmanaged<Delivered<ResultCopy>>.fromOpaque(context!).takeUnretainedValue().value = ResultCopy(
            requestID: String(cString: result.request_id), sequence: result.sequence, error: result.error.rawValue,
            message: String(cString: result.message), duplicate: result.duplicate,
            state: result.state.map { StateCopy($0.pointee) })
    }
    return rc == AUDIOHUB_ERR_SUCCESS ? delivered.value : nil
}

func sdkDecodeState(_ bytes: [UInt8]) -> StateCopy? {
    let delivered = Delivered<StateCopy>()
    let rc = audiohub_internal_decode_state(bytes, bytes.count, Unmanaged.passUnretained(delivered).toOpaque()) {
        context, state in
        Unmanaged<Delivered<StateCopy>>.fromOpaque(context!).takeUnretainedValue().value = StateCopy(state!.pointee)
    }
    return rc == AUDIOHUB_ERR_SUCCESS ? delivered.value : nil
}

// MARK: - What Swift decoded, in the SDK's terms

private func bits(_ capabilities: [Audioaccessory_V1_Capability]) -> UInt32 {
    capabilities.reduce(0) { bits, capability in
        switch capability {
        case .audioSwitching: bits | AUDIOHUB_CAP_AUDIO_SWITCHING
        case .placement: bits | AUDIOHUB_CAP_PLACEMENT
        case .audioSpatialization: bits | AUDIOHUB_CAP_AUDIO_SPATIALIZATION
        case .headTracking: bits | AUDIOHUB_CAP_HEAD_TRACKING
        default: bits
        }
    }
}

/// An address as the SDK shows one: 6 bytes, or none.
private func sdkAddress(_ data: Data) -> [UInt8] { data.count == 6 ? [UInt8](data) : [] }

extension StateCopy {
    init(_ state: Audioaccessory_V1_AccessoryState) {
        let known = (1...4).contains(state.registration.rawValue)
        let placement = state.configuration.devicePlacement.rawValue
        self.init(
            accessoryID: state.accessoryID, hubID: state.hubID,
            registration: known ? UInt32(state.registration.rawValue) : 0, name: state.name, model: state.model,
            hardwareCapabilities: bits(state.hardwareCapabilities),
            capabilities: bits(state.configuration.deviceCapabilities),
            placement: (1...4).contains(placement) ? UInt32(placement) : 0,
            primary: sdkAddress(state.configuration.primaryAudioSourceDeviceIdentifier),
            secondary: sdkAddress(state.configuration.secondaryAudioSourceDeviceIdentifier),
            routedSource: sdkAddress(state.routedSource), lastSequence: state.lastSequence,
            updatedAtUnixMs: state.updatedAtUnixMs, stale: state.stale, diagnostics: state.diagnostics,
            lastError: (1...5).contains(state.lastError.rawValue) ? UInt32(state.lastError.rawValue) : 0,
            lastErrorMessage: state.lastErrorMessage,
            spatialExtension: state.configuration.hasSpatialExtensionDescription
                ? [state.configuration.spatialExtensionDescription].flatMap {
                    [$0.componentType, $0.componentSubType, $0.componentManufacturer, $0.componentFlags,
                     $0.componentFlagsMask]
                } : [])
    }
}

extension ResultCopy {
    init(_ result: Audioaccessory_V1_RequestResult) {
        self.init(
            requestID: result.requestID, sequence: result.sequence,
            error: (1...5).contains(result.error.rawValue) ? UInt32(result.error.rawValue) : 0,
            message: result.message, duplicate: result.duplicate,
            state: result.hasState ? StateCopy(result.state) : nil)
    }
}

// MARK: - Seeded random messages

private func randomText(_ random: inout SeededGenerator, maxLength: Int = 24) -> String {
    let alphabet = Array("abcXYZ019_- äöü—🎧\"\\\t")
    return String((0..<Int.random(in: 0...maxLength, using: &random)).map { _ in alphabet.randomElement(using: &random)! })
}

private func randomID(_ random: inout SeededGenerator) -> String {
    let alphabet = Array("ABCxyz0189_-")
    return String((0..<Int.random(in: 0...64, using: &random)).map { _ in alphabet.randomElement(using: &random)! })
}

private func randomAddress(_ random: inout SeededGenerator, allowOdd: Bool = false) -> Data {
    let length = allowOdd ? [0, 6, 6, 5, 7].randomElement(using: &random)! : [0, 6].randomElement(using: &random)!
    return Data((0..<length).map { _ in UInt8.random(in: 0...255, using: &random) })
}

private func randomCapabilities(_ random: inout SeededGenerator) -> [Audioaccessory_V1_Capability] {
    [
        [], [.audioSwitching], [.placement], [.audioSwitching, .placement], [.placement, .audioSwitching],
        [.audioSwitching, .placement, .audioSpatialization, .headTracking], [.headTracking, .audioSpatialization],
    ].randomElement(using: &random)!
}

private func randomSequence(_ random: inout SeededGenerator) -> UInt64 {
    [0, 1, UInt64.random(in: 0...UInt64.max, using: &random), .max].randomElement(using: &random)!
}

private func randomTelemetry(_ random: inout SeededGenerator) -> Audioaccessory_V1_AccessoryTelemetry {
    Audioaccessory_V1_AccessoryTelemetry.with {
        $0.sequence = randomSequence(&random)
        $0.requestID = randomID(&random)
        $0.accessoryID = randomID(&random)
        switch Int.random(in: 0..<6, using: &random) {
        case 0:
            $0.paired = .with {
                $0.name = randomText(&random)
                $0.model = randomText(&random)
                $0.hardwareCapabilities = randomCapabilities(&random)
            }
        case 1: $0.unpaired = Audioaccessory_V1_Unpaired()
        case 2: $0.register = .with { $0.capabilities = randomCapabilities(&random) }
        case 3:
            $0.update = .with {
                $0.deviceCapabilities = randomCapabilities(&random)
                $0.devicePlacement = Audioaccessory_V1_Placement(rawValue: Int.random(in: 0...4, using: &random))!
                $0.primaryAudioSourceDeviceIdentifier = randomAddress(&random)
                $0.secondaryAudioSourceDeviceIdentifier = randomAddress(&random)
            }
        case 4:
            $0.placement = .with {
                $0.placement = Audioaccessory_V1_Placement(rawValue: Int.random(in: 0...4, using: &random))!
            }
        default:
            $0.sources = .with {
                $0.primary = randomAddress(&random)
                $0.secondary = randomAddress(&random)
            }
        }
    }
}

private func randomState(_ random: inout SeededGenerator) -> Audioaccessory_V1_AccessoryState {
    Audioaccessory_V1_AccessoryState.with {
        $0.accessoryID = randomID(&random)
        $0.hubID = randomID(&random)
        // Values beyond the enums too, as a newer bridge might send.
        $0.registration = Audioaccessory_V1_Registration(rawValue: Int.random(in: 0...6, using: &random))!
        $0.name = randomText(&random)
        $0.model = randomText(&random)
        $0.hardwareCapabilities = randomCapabilities(&random) + (Bool.random(using: &random) ? [.UNRECOGNIZED(7)] : [])
        if Bool.random(using: &random) {
            $0.configuration = .with {
                $0.deviceCapabilities = randomCapabilities(&random)
                $0.devicePlacement = Audioaccessory_V1_Placement(rawValue: Int.random(in: 0...6, using: &random))!
                $0.primaryAudioSourceDeviceIdentifier = randomAddress(&random, allowOdd: true)
                $0.secondaryAudioSourceDeviceIdentifier = randomAddress(&random, allowOdd: true)
                if Bool.random(using: &random) {
                    $0.spatialExtensionDescription = .with {
                        $0.componentType = UInt32.random(in: 0...UInt32.max, using: &random)
                        $0.componentSubType = UInt32.random(in: 0...UInt32.max, using: &random)
                        $0.componentManufacturer = UInt32.random(in: 0...UInt32.max, using: &random)
                        $0.componentFlags = UInt32.random(in: 0...UInt32.max, using: &random)
                        $0.componentFlagsMask = UInt32.random(in: 0...UInt32.max, using: &random)
                    }
                }
            }
        }
        $0.routedSource = randomAddress(&random, allowOdd: true)
        $0.lastSequence = randomSequence(&random)
        $0.updatedAtUnixMs = Int64.random(in: Int64.min...Int64.max, using: &random)
        $0.stale = Bool.random(using: &random)
        $0.diagnostics = (0..<Int.random(in: 0...3, using: &random)).map { _ in randomText(&random) }
        $0.lastError = Audioaccessory_V1_ErrorCode(rawValue: Int.random(in: 0...7, using: &random))!
        $0.lastErrorMessage = randomText(&random)
    }
}

private func randomResult(_ random: inout SeededGenerator) -> Audioaccessory_V1_RequestResult {
    Audioaccessory_V1_RequestResult.with {
        $0.requestID = randomID(&random)
        $0.sequence = randomSequence(&random)
        $0.error = Audioaccessory_V1_ErrorCode(rawValue: Int.random(in: 0...7, using: &random))!
        $0.message = randomText(&random, maxLength: 200)
        $0.duplicate = Bool.random(using: &random)
        if Int.random(in: 0..<4, using: &random) > 0 {
            $0.state = randomState(&random)
        }
    }
}
