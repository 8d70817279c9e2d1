import AccessoryModel
@testable import AccessoryWire
import Foundation
import Testing

@Suite struct MappingTests {
    static let headphones = AccessoryID("headphones")!
    static let phone = BluetoothAddress("12:34:56:78:9A:BC")!
    static let laptop = BluetoothAddress("AB:CD:EF:01:23:45")!

    static let requests: [AccessoryRequest] = [
        .paired(name: "Studio Pro ✨", model: "SP-2", hardwareCapabilities: .all),
        .paired(name: "", model: "", hardwareCapabilities: []),
        .unpaired,
        .register([.audioSwitching]),
        .register(.all),
        .update(Configuration(devicePlacement: .overTheEar, deviceCapabilities: .all,
            primaryAudioSourceDeviceIdentifier: phone.data, secondaryAudioSourceDeviceIdentifier: laptop.data)),
        .update(Configuration(deviceCapabilities: .audioSwitching)),
        .placement(.inEar), .placement(.offHead), .placement(nil),
        .sources(primary: phone.data, secondary: nil),
        .sources(primary: nil, secondary: nil),
    ]

    @Test(arguments: requests)
    func everyRequestRoundTrips(_ request: AccessoryRequest) throws {
        let telemetry = Audioaccessory_V1_AccessoryTelemetry(request, sequence: 9, requestID: "r")
        #expect(telemetry.sequence == 9)
        #expect(telemetry.requestID == "r")
        #expect(try telemetry.request(for: Self.headphones) == request)
        // Through the wire and back, in both formats.
        let codec = WireCodec()
        for format in PayloadFormat.allCases {
            let decoded = try codec.decode(
                Audioaccessory_V1_AccessoryTelemetry.self, from: codec.encode(telemetry, as: format), format: format)
            #expect(try decoded.request(for: Self.headphones) == request)
        }
    }

    static let invalid: [(String, Audioaccessory_V1_AccessoryTelemetry, String)] = [
        ("no event", .with { $0.sequence = 1 }, "carries no event; set one of paired, unpaired, register"),
        ("another accessory in the payload", .with {
            $0.accessoryID = "earbuds"
            $0.unpaired = .init()
        }, "the payload names accessory 'earbuds' but the topic names 'headphones'"),
        ("an UNSPECIFIED capability", .with { $0.register = .with { $0.capabilities = [.audioSwitching, .unspecified] } },
         "register.capabilities holds CAPABILITY_UNSPECIFIED, which is not a capability"),
        ("a capability beyond what a set holds", .with { $0.register = .with { $0.capabilities = [.UNRECOGNIZED(33)] } },
         "register.capabilities holds 33, beyond the 32 capabilities a set can hold"),
        ("an unspecified hardware capability", .with { $0.paired = .with { $0.hardwareCapabilities = [.unspecified] } },
         "paired.hardware_capabilities holds CAPABILITY_UNSPECIFIED"),
        ("an unknown placement", .with { $0.placement = .with { $0.placement = .UNRECOGNIZED(9) } },
         "placement.placement is 9, which is not a known Placement"),
        ("an unknown placement in an update", .with { $0.update = .with { $0.devicePlacement = .UNRECOGNIZED(5) } },
         "device_placement is 5"),
        ("an UNSPECIFIED capability in an update", .with { $0.update = .with { $0.deviceCapabilities = [.unspecified] } },
         "device_capabilities holds CAPABILITY_UNSPECIFIED"),
    ]

    @Test(arguments: invalid)
    func invalidTelemetryIsAnInvalidRequest(_ name: String, _ telemetry: Audioaccessory_V1_AccessoryTelemetry, _ reason: String) {
        let error = #expect(throws: AccessoryControlError.self, "\(name)") { try telemetry.request(for: Self.headphones) }
        #expect(error?.code == .invalidRequest, "\(name)")
        #expect(error?.reason.contains(reason) == true, "\(name): \(error?.reason ?? "none")")
    }

    @Test func anEventFromANewerSchemaIsUnknown() throws {
        // Field 20, length-delimited, empty: what a newer hub's new event would look like to this version.
        let bytes: [UInt8] = [0x08, 0x07, 0xA2, 0x01, 0x00]
        let telemetry = try WireCodec().decode(Audioaccessory_V1_AccessoryTelemetry.self, from: bytes, format: .protobuf)
        #expect(telemetry.sequence == 7)
        let error = #expect(throws: AccessoryControlError.self) { try telemetry.request(for: Self.headphones) }
        #expect(error?.code == .unknown)
        #expect(error?.reason.contains("fields this bridge does not know") == true)
    }

    @Test func thePayloadMayRepeatTheTopicsAccessory() throws {
        let telemetry = Audioaccessory_V1_AccessoryTelemetry.with {
            $0.accessoryID = "headphones"
            $0.unpaired = .init()
        }
        #expect(try telemetry.request(for: Self.headphones) == .unpaired)
    }

    @Test func accessoryStateCarriesCurrentForAndTheRoute() throws {
        let accessory = Accessory(
            id: Self.headphones, hub: HubID("hub-1")!, registration: .registered, name: "Studio", model: "SP",
            hardwareCapabilities: .all,
            configuration: Configuration(devicePlacement: .onHead, deviceCapabilities: .all,
                primaryAudioSourceDeviceIdentifier: Self.phone.data),
            lastSequence: 12, updatedAt: Timestamp(unixMilliseconds: 1_763_790_000_123), isStale: true,
            diagnostics: [.hubOffline(HubID("hub-1")!)])
        let state = Audioaccessory_V1_AccessoryState(accessory, routedSource: Self.phone)
        #expect(state.accessoryID == "headphones")
        #expect(state.hubID == "hub-1")
        #expect(state.registration == .registered)
        #expect(state.name == "Studio")
        #expect(state.model == "SP")
        #expect(state.hardwareCapabilities == [.audioSwitching, .placement, .audioSpatialization, .headTracking])
        #expect(try state.configuration.configuration() == accessory.configuration)
        #expect(state.routedSource == Self.phone.data)
        #expect(state.lastSequence == 12)
        #expect(state.updatedAtUnixMs == 1_763_790_000_123)
        #expect(state.stale)
        #expect(state.diagnostics == [Diagnostic.hubOffline(HubID("hub-1")!).description])
        #expect(Audioaccessory_V1_AccessoryState(accessory, routedSource: nil).routedSource.isEmpty)
    }

    @Test func aPublishedStateRestoresTheAccessory() throws {
        let hub = HubID("hub-1")!
        let accessory = Accessory(
            id: Self.headphones, hub: hub, registration: .registered, name: "Studio", model: "SP",
            hardwareCapabilities: .all,
            configuration: Configuration(devicePlacement: nil, deviceCapabilities: .all,
                primaryAudioSourceDeviceIdentifier: Self.phone.data, secondaryAudioSourceDeviceIdentifier: Self.laptop.data),
            lastSequence: 12, updatedAt: Timestamp(unixMilliseconds: 1_000), registeredAt: Timestamp(unixMilliseconds: 1_000),
            isStale: true, diagnostics: [.hubOffline(hub), .placementNotReported(after: .seconds(30))])
        let state = Audioaccessory_V1_AccessoryState(accessory, routedSource: nil)
        let restored = try state.state(at: Timestamp(unixMilliseconds: 5_000))
        #expect(restored == AccessoryState(accessory, routedSource: nil))
        #expect(state.lastError == .none, "sequence 12 succeeded")
        // The last outcome comes back too: a retry after a restart is answered as the first time.
        for lastError: AccessoryControlError in [.accessoryNotCapable(reason: "a"), .invalidated(reason: "b"), .unknown(reason: "c")] {
            let failed = Accessory(
                id: accessory.id, hub: accessory.hub, registration: accessory.registration, name: accessory.name,
                model: accessory.model, hardwareCapabilities: accessory.hardwareCapabilities,
                configuration: accessory.configuration, lastSequence: 12, lastError: lastError,
                updatedAt: accessory.updatedAt, registeredAt: accessory.registeredAt, isStale: accessory.isStale,
                diagnostics: accessory.diagnostics)
            let published = Audioaccessory_V1_AccessoryState(failed, routedSource: Self.laptop)
            #expect(try published.state(at: Timestamp(unixMilliseconds: 5_000)) == AccessoryState(failed, routedSource: Self.laptop))
        }
        // No sequence yet: no outcome either.
        let unsequenced = Accessory(
            id: Self.headphones, hub: hub, registration: .paired, hardwareCapabilities: .all, updatedAt: .zero)
        #expect(Audioaccessory_V1_AccessoryState(unsequenced, routedSource: nil).lastError == .unspecified)
        // Diagnostics come back from their words, whatever grace period wrote them; unknown words are kept as reported.
        var other = state
        other.diagnostics = [Diagnostic.sourcesNotReported(after: .milliseconds(1500)).description, "a newer warning"]
        #expect(try other.state(at: .zero).accessory.diagnostics == [
            .sourcesNotReported(after: .milliseconds(1500)), .reported("a newer warning"),
        ])
        // A state from the future registered now at the latest.
        let early = try state.state(at: Timestamp(unixMilliseconds: 500))
        #expect(early.accessory.registeredAt == Timestamp(unixMilliseconds: 500))
        var broken = state
        broken.hubID = "no/hub"
        #expect(throws: AccessoryControlError.self) { try broken.state(at: .zero) }
        broken = state
        broken.registration = .unspecified
        #expect(throws: AccessoryControlError.self) { try broken.state(at: .zero) }
    }

    @Test(arguments: Diagnostic.allExamples)
    func diagnosticsReadBackFromTheirWords(_ diagnostic: Diagnostic) {
        #expect(Diagnostic(description: diagnostic.description) == diagnostic)
    }

    @Test(arguments: [
        "hub  is offline: this state may be out of date and the accessory takes no part in routing",
        "hub h\u{e9} is offline: this state may be out of date and the accessory takes no part in routing",
        "hub h1 is offline: this state may be out of date",
        "registered with .placement but no placement was reported within 30 s of registering",
        "registered with .placement but no placement was reported within thirty seconds of registering; "
            + "report every placement change, .offHead included",
        "registered with .audioSwitching but no audio source was reported within 2 s of registering; "
            + "report the Bluetooth addresses of the connected sources\u{301}",
    ])
    func wordsThatOnlyLookLikeADiagnosticReadAsReported(_ text: String) {
        #expect(Diagnostic(description: text) == .reported(text))
    }

    @Test(arguments: [nil] + AccessoryControlError.Code.allCases.map(Optional.some))
    func requestResultsCarryTheError(_ code: AccessoryControlError.Code?) throws {
        let error = code.map { AccessoryControlError($0, reason: "because") }
        let model = RequestResult(
            requestID: "r-1", sequence: 3, outcome: error.map { .failed($0) } ?? .succeeded, state: nil)
        let result = Audioaccessory_V1_RequestResult(model)
        #expect(result.requestID == "r-1")
        #expect(result.sequence == 3)
        #expect(result.error == (code == nil ? .none : result.error))
        #expect(result.error.code == code)
        #expect(result.message == (code == nil ? "" : "because"))
        #expect(!result.hasState)
        #expect(try result.result(at: .zero) == model)
    }

    @Test func errorCodesUnknownToThisVersionReadAsUnknown() {
        #expect(Audioaccessory_V1_ErrorCode.unspecified.code == .unknown)
        #expect(Audioaccessory_V1_ErrorCode.UNRECOGNIZED(42).code == .unknown)
        #expect(Audioaccessory_V1_ErrorCode.none.code == nil)
    }

    @Test(arguments: SwitchCommand.Action.allCases)
    func switchCommandsRoundTrip(_ action: SwitchCommand.Action) throws {
        for reason in SwitchCommand.Reason.allCases {
            let command = SwitchCommand(
                id: "b-123456789abc-7", sequence: 7, source: Self.phone, accessoryID: Self.headphones, action: action,
                reason: reason, issuedAt: Timestamp(unixMilliseconds: 1_763_790_000_999))
            let wire = Audioaccessory_V1_SwitchCommand(command)
            #expect(wire.commandID == "b-123456789abc-7")
            #expect(wire.accessoryID == "headphones")
            #expect(wire.issuedAtUnixMs == 1_763_790_000_999)
            #expect(try wire.command(for: Self.phone) == command)
        }
    }

    @Test func sourceStatesRoundTrip() throws {
        for activity in [nil] + Activity.allCases.map(Optional.some) {
            for routed in [nil, Self.headphones] {
                let report = SourceReport(sequence: 5, activity: activity, routedAccessory: routed)
                #expect(try Audioaccessory_V1_SourceState(report).report() == report)
            }
        }
        let unknown = Audioaccessory_V1_SourceState.with { $0.activity = .UNRECOGNIZED(8) }
        #expect(throws: AccessoryControlError.invalidRequest(reason: "activity is 8, which is not a known Activity")) {
            try unknown.report()
        }
        let badID = Audioaccessory_V1_SourceState.with { $0.routedAccessoryID = "a/b" }
        #expect(throws: AccessoryControlError.self) { try badID.report() }
    }

    @Test func enumsMapOneToOne() throws {
        for registration in Registration.allCases {
            #expect(try Audioaccessory_V1_Registration(registration).registration(field: "r") == registration)
        }
        for placement in Placement.allCases {
            #expect(try Audioaccessory_V1_Placement(placement).placement(field: "p") == placement)
        }
        #expect(try Audioaccessory_V1_Placement(nil).placement(field: "p") == nil)
        #expect(throws: AccessoryControlError.self) { try Audioaccessory_V1_Registration.unspecified.registration(field: "r") }
        #expect(throws: AccessoryControlError.self) { try Audioaccessory_V1_Action.unspecified.action(field: "a") }
        #expect(throws: AccessoryControlError.self) { try Audioaccessory_V1_Reason.UNRECOGNIZED(99).reason(field: "r") }
    }
}

extension Diagnostic {
    static let allExamples: [Diagnostic] = [
        .placementNotReported(after: .seconds(30)), .placementNotReported(after: .milliseconds(250)),
        .sourcesNotReported(after: .seconds(5)), .hubOffline(HubID("hub-7")!), .reported("something else"),
    ]
}

/// The public codec: every message of the contract as a model value, through both payload formats.
@Suite struct PublicCodecTests {
    static let codec = WireCodec()
    static let now = Timestamp(unixMilliseconds: 1_763_790_000_000)
    static let phone = BluetoothAddress("12:34:56:78:9A:BC")!
    static let state = state(named: "Studio")

    static func state(named name: String) -> AccessoryState {
        AccessoryState(
            Accessory(
                id: AccessoryID("hp")!, hub: HubID("hub-1")!, registration: .registered, name: name, model: "S",
                hardwareCapabilities: .all,
                configuration: Configuration(
                    devicePlacement: .onHead, deviceCapabilities: .all, primaryAudioSourceDeviceIdentifier: phone.data),
                lastSequence: 4, lastError: .accessoryNotCapable(reason: "no"), updatedAt: now, registeredAt: now,
                diagnostics: [.hubOffline(HubID("hub-1")!)]),
            routedSource: phone)
    }

    @Test(arguments: PayloadFormat.allCases)
    func everyMessageRoundTrips(_ format: PayloadFormat) throws {
        let c = Self.codec
        #expect(try c.decode(AccessoryState.self, from: c.encode(Self.state, as: format), format: format, at: Self.now)
            == Self.state)
        for outcome: RequestResult.Outcome in [.succeeded, .failed(.invalidated(reason: "again")), .notKept("gone")] {
            let result = RequestResult(
                requestID: "r", sequence: 9, outcome: outcome, duplicate: outcome == .notKept("gone"),
                state: Self.state)
            #expect(try c.decode(RequestResult.self, from: c.encode(result, as: format), format: format, at: Self.now)
                == result)
        }
        let report = SourceReport(sequence: 3, activity: .call, routedAccessory: AccessoryID("hp")!)
        #expect(try c.decode(SourceReport.self, from: c.encode(report, as: format), format: format) == report)
        let command = SwitchCommand(
            id: "b-1", sequence: 1, source: Self.phone, accessoryID: AccessoryID("hp")!, action: .pause,
            reason: .takenOff, issuedAt: Self.now)
        #expect(try c.decode(SwitchCommand.self, from: c.encode(command, as: format), format: format, source: Self.phone)
            == command)
        let hub = HubStatus(online: true, since: Self.now)
        #expect(try c.decode(HubStatus.self, from: c.encode(hub, as: format), format: format) == hub)
        let bridge = BridgeStatus(online: false, since: Self.now)
        #expect(try c.decode(BridgeStatus.self, from: c.encode(bridge, as: format), format: format) == bridge)
        for layout in [BridgeLayout(slots: nil), BridgeLayout(slots: ClusterSlots(12)!)] {
            let payload = c.encode(layout, as: format)
            // Never empty: an empty retained message deletes the retained one.
            #expect(!payload.isEmpty)
            #expect(try c.decode(BridgeLayout.self, from: payload, format: format) == layout)
        }
        let rebirth = RebirthRequest(accessory: AccessoryID("hp")!, lastSequence: 41, receivedSequence: 44)
        #expect(rebirth.reason.contains("2 messages missing"))
        #expect(try c.decode(RebirthRequest.self, from: c.encode(rebirth, as: format), format: format) == rebirth)
        let telemetry = try c.readTelemetry(
            from: c.encodeTelemetry(.placement(.inEar), sequence: 5, requestID: "x", as: format), format: format,
            for: AccessoryID("hp")!)
        #expect(telemetry == InboundTelemetry(sequence: 5, requestID: "x", request: .success(.placement(.inEar))))
    }

    /// A result embedding its state's bytes is byte for byte what swift-protobuf writes for it, whatever the
    /// outcome, the duplicate flag, and the state's length (a name of 200 bytes takes the length past one byte).
    @Test(arguments: ["", "Studio", String(repeating: "n", count: 200)])
    func aResultEmbeddingItsStatesBytesIsTheResultEncoded(_ name: String) throws {
        let c = Self.codec
        let state = Self.state(named: name)
        let outcomes: [RequestResult.Outcome] = [.succeeded, .failed(.invalidated(reason: "again")), .notKept("gone")]
        for outcome in outcomes {
            for duplicate in [false, true] {
                for requestID in ["", "r-1"] {
                    let result = RequestResult(
                        requestID: requestID, sequence: 9, outcome: outcome, duplicate: duplicate, state: state)
                    let embedded = c.encode(result, as: .protobuf, embedding: c.encoded(state, as: .protobuf))
                    let reference: [UInt8] = try Audioaccessory_V1_RequestResult(result).serializedBytes()
                    #expect(embedded == reference, "\(result)")
                }
            }
        }
    }

    /// Another state, another format or no state: the result is encoded in full, never with the wrong bytes.
    @Test func aResultEmbedsOnlyTheSameStateInTheSameFormat() {
        let c = Self.codec
        let other = Self.state(named: "Other")
        let result = RequestResult(requestID: "r", sequence: 9, outcome: .succeeded, state: Self.state)
        for (result, format, encoded) in [
            (result, PayloadFormat.protobuf, c.encoded(other, as: .protobuf)),
            (result, .json, c.encoded(Self.state, as: .json)),
            (result, .json, c.encoded(Self.state, as: .protobuf)),
            (result, .protobuf, c.encoded(Self.state, as: .json)),
            (RequestResult(requestID: "r", sequence: 9, outcome: .succeeded, state: nil), .protobuf,
                c.encoded(Self.state, as: .protobuf)),
        ] {
            #expect(c.encode(result, as: format, embedding: encoded) == c.encode(result, as: format))
        }
    }

    @Test func aValueThisVersionRefusesIsAnInvalidValue() {
        let error = #expect(throws: WireError.self) {
            try Self.codec.decode(SourceReport.self, from: Array(#"{"activity": 9}"#.utf8), format: .json)
        }
        #expect(error?.kind == .invalidValue)
        #expect(error?.reason.contains("9, which is not a known Activity") == true)
    }

    @Test func aLayoutOfMoreSlotsThanAClusterMayHaveIsAnInvalidValue() {
        let error = #expect(throws: WireError.self) {
            try Self.codec.decode(BridgeLayout.self, from: Array(#"{"slots": 4097}"#.utf8), format: .json)
        }
        #expect(error?.kind == .invalidValue)
        #expect(error?.reason.contains("0 (a single bridge) or 1-4096, not 4097") == true)
    }
}
