import AccessoryModel
import Foundation
import Testing

/// AudioAccessoryKit's `AccessoryControlDevice` semantics, one accessory at a time.
@Suite struct AccessoryStateMachineTests {
    typealias F = Fixture

    static let pair = AccessoryRequest.paired(name: "Studio Pro", model: "SP-2", hardwareCapabilities: .all)
    static let pairSwitchingOnly = AccessoryRequest.paired(
        name: "Buds", model: "B-1", hardwareCapabilities: .audioSwitching)
    static let registerAll = AccessoryRequest.register(.all)
    static let registerSwitching = AccessoryRequest.register(.audioSwitching)

    static func update(
        _ capabilities: Capabilities = .all, placement: Placement? = nil, primary: Data? = nil, secondary: Data? = nil
    ) -> AccessoryRequest {
        .update(
            Configuration(
                devicePlacement: placement, deviceCapabilities: capabilities,
                primaryAudioSourceDeviceIdentifier: primary, secondaryAudioSourceDeviceIdentifier: secondary))
    }

    /// A machine that applied `steps` (each from hub A unless given), all of which must succeed.
    static func machine(after steps: [(AccessoryRequest, HubID)]) throws -> AccessoryStateMachine {
        var machine = AccessoryStateMachine(id: F.headphones)
        for (index, (request, hub)) in steps.enumerated() {
            try machine.apply(request, from: hub, at: F.at(Double(index)))
        }
        return machine
    }

    // MARK: - Every error path

    struct ErrorCase: Sendable, CustomTestStringConvertible {
        var name: String
        var given: [(AccessoryRequest, HubID)]
        var request: AccessoryRequest
        var hub = Fixture.hubA
        var error: AccessoryControlError.Code
        var reasonMentions: String
        var testDescription: String { name }
    }

    static let errorCases: [ErrorCase] = [
        // Pairing
        ErrorCase(
            name: "pairing with a name over 256 bytes", given: [],
            request: .paired(name: String(repeating: "é", count: 129), model: "y", hardwareCapabilities: .all),
            error: .invalidRequest, reasonMentions: "name is 258 bytes long; the limit is 256"),
        ErrorCase(
            name: "pairing with a model over 256 bytes", given: [],
            request: .paired(name: "x", model: String(repeating: "m", count: 257), hardwareCapabilities: .all),
            error: .invalidRequest, reasonMentions: "model is 257 bytes long"),
        ErrorCase(
            name: "unpairing an accessory never paired", given: [], request: .unpaired,
            error: .invalidRequest, reasonMentions: "accessory headphones is not paired"),
        ErrorCase(
            name: "unpairing from another hub", given: [(pair, F.hubA)], request: .unpaired, hub: F.hubB,
            error: .invalidRequest, reasonMentions: "belongs to another hub: hub hub-b may change only the accessories it paired"),
        // register(capabilities)
        ErrorCase(
            name: "registering an accessory never paired", given: [], request: registerAll,
            error: .invalidRequest, reasonMentions: "accessory headphones is not paired"),
        ErrorCase(
            name: "registering after unpairing", given: [(pair, F.hubA), (.unpaired, F.hubA)], request: registerAll,
            error: .invalidRequest, reasonMentions: "was unpaired; pair it again"),
        ErrorCase(
            name: "registering from a hub it is not paired with", given: [(pair, F.hubA)], request: registerAll,
            hub: F.hubB, error: .invalidRequest, reasonMentions: "belongs to another hub: hub hub-b may change only the accessories it paired"),
        ErrorCase(
            name: "registering from the old hub after pairing moved",
            given: [(pair, F.hubA), (.unpaired, F.hubA), (pair, F.hubB)], request: registerAll,
            error: .invalidRequest, reasonMentions: "belongs to another hub: hub hub-a may change only"),
        ErrorCase(
            name: "pairing from another hub while it is paired", given: [(pair, F.hubA)], request: pair, hub: F.hubB,
            error: .invalidRequest, reasonMentions: "unpair it from its hub first, or choose another id"),
        ErrorCase(
            name: "registering from another hub after its hub unpaired it",
            given: [(pair, F.hubA), (.unpaired, F.hubA)], request: registerAll, hub: F.hubB,
            error: .invalidRequest, reasonMentions: "accessory headphones is not paired"),
        ErrorCase(
            name: "registering no capability", given: [(pair, F.hubA)], request: .register([]),
            error: .invalidRequest, reasonMentions: "at least one capability"),
        ErrorCase(
            name: "registering a capability the hardware lacks", given: [(pairSwitchingOnly, F.hubA)],
            request: registerAll, error: .accessoryNotCapable,
            reasonMentions: "cannot register [.placement, .audioSpatialization, .headTracking]: its hardware capabilities are [.audioSwitching]"),
        // update(configuration)
        ErrorCase(
            name: "updating an accessory never paired", given: [], request: update(),
            error: .invalidRequest, reasonMentions: "accessory headphones is not paired"),
        ErrorCase(
            name: "updating before registering", given: [(pair, F.hubA)], request: update(),
            error: .invalidRequest, reasonMentions: "is not registered; register it before updating"),
        ErrorCase(
            name: "updating after re-pairing invalidated the registration",
            given: [(pair, F.hubA), (registerAll, F.hubA), (pair, F.hubA)], request: update(),
            error: .invalidated, reasonMentions: "invalidated when it was paired again"),
        ErrorCase(
            name: "updating after unpairing", given: [(pair, F.hubA), (registerAll, F.hubA), (.unpaired, F.hubA)],
            request: update(), error: .invalidated, reasonMentions: "was unpaired, which ended its registration"),
        ErrorCase(
            name: "updating from another hub", given: [(pair, F.hubA), (registerAll, F.hubA)], request: update(),
            hub: F.hubB, error: .invalidRequest, reasonMentions: "belongs to another hub: hub hub-b may change only the accessories it paired"),
        ErrorCase(
            name: "updating with capabilities other than the registered ones",
            given: [(pair, F.hubA), (registerAll, F.hubA)], request: update(.audioSwitching),
            error: .invalidRequest, reasonMentions: "differ from the registered [.audioSwitching, .placement, .audioSpatialization, .headTracking]"),
        ErrorCase(
            name: "updating a placement without the placement capability",
            given: [(pair, F.hubA), (registerSwitching, F.hubA)], request: update(.audioSwitching, placement: .onHead),
            error: .accessoryNotCapable, reasonMentions: "placement .onHead needs the .placement capability"),
        ErrorCase(
            name: "updating with a 5-byte primary", given: [(pair, F.hubA), (registerAll, F.hubA)],
            request: update(primary: F.bytes(5)), error: .invalidRequest,
            reasonMentions: "primaryAudioSourceDeviceIdentifier must be empty or a 6-byte Bluetooth address, not 5"),
        ErrorCase(
            name: "updating with a 7-byte primary", given: [(pair, F.hubA), (registerAll, F.hubA)],
            request: update(primary: F.bytes(7)), error: .invalidRequest, reasonMentions: "not 7 bytes"),
        ErrorCase(
            name: "updating with a 1-byte secondary", given: [(pair, F.hubA), (registerAll, F.hubA)],
            request: update(primary: F.phone.data, secondary: F.bytes(1)), error: .invalidRequest,
            reasonMentions: "secondaryAudioSourceDeviceIdentifier must be empty or a 6-byte"),
        ErrorCase(
            name: "updating with the same primary and secondary", given: [(pair, F.hubA), (registerAll, F.hubA)],
            request: update(primary: F.phone.data, secondary: F.phone.data), error: .invalidRequest,
            reasonMentions: "same address, 12:34:56:78:9A:BC"),
        ErrorCase(
            name: "updating with a secondary but no primary", given: [(pair, F.hubA), (registerAll, F.hubA)],
            request: update(secondary: F.laptop.data), error: .invalidRequest,
            reasonMentions: "secondaryAudioSourceDeviceIdentifier (AB:CD:EF:01:23:45) needs a primary"),
        // PlacementReport and SourcesReport: updates of one part, same rules
        ErrorCase(
            name: "reporting a placement before registering", given: [(pair, F.hubA)], request: .placement(.inEar),
            error: .invalidRequest, reasonMentions: "register it before placement updates"),
        ErrorCase(
            name: "reporting a placement without the placement capability",
            given: [(pair, F.hubA), (registerSwitching, F.hubA)], request: .placement(.inEar),
            error: .accessoryNotCapable, reasonMentions: "placement .inEar needs the .placement capability"),
        ErrorCase(
            name: "reporting a placement after invalidation",
            given: [(pair, F.hubA), (registerAll, F.hubA), (pair, F.hubA)], request: .placement(.inEar),
            error: .invalidated, reasonMentions: "invalidated when it was paired again"),
        ErrorCase(
            name: "reporting sources of the wrong length", given: [(pair, F.hubA), (registerAll, F.hubA)],
            request: .sources(primary: F.bytes(4), secondary: nil), error: .invalidRequest, reasonMentions: "not 4 bytes"),
        ErrorCase(
            name: "reporting the same source twice", given: [(pair, F.hubA), (registerAll, F.hubA)],
            request: .sources(primary: F.laptop.data, secondary: F.laptop.data), error: .invalidRequest,
            reasonMentions: "same address"),
        ErrorCase(
            name: "reporting sources from another hub", given: [(pair, F.hubA), (registerAll, F.hubA)],
            request: .sources(primary: F.phone.data, secondary: nil), hub: F.hubB, error: .invalidRequest,
            reasonMentions: "belongs to another hub: hub hub-b may change only the accessories it paired"),
        ErrorCase(
            name: "reporting sources after unpairing", given: [(pair, F.hubA), (registerAll, F.hubA), (.unpaired, F.hubA)],
            request: .sources(primary: F.phone.data, secondary: nil), error: .invalidated,
            reasonMentions: "was unpaired"),
        // iOS 27: a spatial rendering extension needs .audioSpatialization, as a placement needs .placement.
        ErrorCase(
            name: "registering a spatial extension without audioSpatialization", given: [(pair, F.hubA)],
            request: .register([.audioSwitching, .headTracking], spatialExtensionDescription: spatialExtension),
            error: .accessoryNotCapable,
            reasonMentions: "needs the .audioSpatialization capability, which accessory headphones did not register"),
        ErrorCase(
            name: "updating with a spatial extension without audioSpatialization",
            given: [(pair, F.hubA), (registerSwitching, F.hubA)],
            request: .update(
                Configuration(deviceCapabilities: .audioSwitching, spatialExtensionDescription: spatialExtension)),
            error: .accessoryNotCapable, reasonMentions: "spatialExtensionDescription (type 0xaaf, subtype 0xc0f"),
        ErrorCase(
            name: "registering head tracking the hardware lacks", given: [(pairSwitchingOnly, F.hubA)],
            request: .register([.audioSwitching, .headTracking]), error: .accessoryNotCapable,
            reasonMentions: "cannot register [.headTracking]: its hardware capabilities are [.audioSwitching]"),
    ]

    /// Apple's example of an `AudioComponentDescription`.
    static let spatialExtension = AudioComponentDescription(
        componentType: 0xaaf, componentSubType: 0xc0f, componentManufacturer: 0xb05e)

    @Test func aSpatialExtensionIsKeptWithAudioSpatialization() throws {
        var machine = try Self.machine(after: [(Self.pair, F.hubA)])
        try machine.apply(
            .register([.audioSwitching, .audioSpatialization], spatialExtensionDescription: Self.spatialExtension),
            from: F.hubA, at: F.at(1))
        #expect(try machine.current().configuration.spatialExtensionDescription == Self.spatialExtension)
        // An update keeps it, or drops it, as the whole configuration says.
        try machine.apply(
            .update(Configuration(deviceCapabilities: [.audioSwitching, .audioSpatialization])), from: F.hubA, at: F.at(2))
        #expect(try machine.current().configuration.spatialExtensionDescription == nil)
    }

    @Test func capabilitiesOfALaterVersionAreKeptAndShown() throws {
        // Bit 5 (the wire's capability 6) is none this version knows: kept from pairing to registration, and shown.
        let later = Capabilities(rawValue: 1 << 5)
        var machine = AccessoryStateMachine(id: F.headphones)
        try machine.apply(.paired(name: "N", model: "M", hardwareCapabilities: [.audioSwitching, later]), from: F.hubA, at: F.at(0))
        try machine.apply(.register([.audioSwitching, later]), from: F.hubA, at: F.at(1))
        let accessory = try machine.current()
        #expect(accessory.configuration.deviceCapabilities == [.audioSwitching, later])
        #expect(accessory.configuration.deviceCapabilities.description == "[.audioSwitching, rawValue: 32]")
    }

    @Test(arguments: errorCases)
    func failsWithTheAudioAccessoryKitError(_ testCase: ErrorCase) throws {
        var machine = try Self.machine(after: testCase.given)
        let before = machine.accessory
        let error = #expect(throws: AccessoryControlError.self) {
            try machine.apply(testCase.request, sequence: 99, from: testCase.hub, at: F.at(100))
        }
        #expect(error?.code == testCase.error)
        #expect(error?.reason.contains(testCase.reasonMentions) == true, "reason: \(error?.reason ?? "none")")
        #expect(machine.accessory == before, "a failed request changes nothing")
    }

    @Test func errorsMatchByKindLikeAudioAccessoryKit() throws {
        var machine = try Self.machine(after: [(Self.pair, F.hubA), (Self.registerAll, F.hubA), (Self.pair, F.hubA)])
        do {
            try machine.apply(Self.update(), from: F.hubA, at: F.at(9))
            Issue.record("update after invalidation must throw")
        } catch AccessoryControlError.invalidated {
            // The kind matches without naming the reason, as `catch AccessoryControlDevice.Error.invalidated` does.
        } catch {
            Issue.record("unexpected error \(error)")
        }
        #expect(AccessoryControlError.invalidRequest(reason: "x").description == "invalidRequest: x")
        for code in AccessoryControlError.Code.allCases {
            #expect(AccessoryControlError(code, reason: "r").code == code)
            #expect(AccessoryControlError(code, reason: "r").reason == "r")
        }
    }

    // MARK: - current(for:)

    @Test func currentThrowsUntilPaired() throws {
        var machine = AccessoryStateMachine(id: F.headphones)
        #expect(throws: AccessoryControlError.invalidRequest(reason: "accessory headphones is not paired")) {
            try machine.current()
        }
        try machine.apply(Self.pair, from: F.hubA, at: F.at(0))
        let accessory = try machine.current()
        #expect(accessory.id == F.headphones)
        #expect(accessory.hub == F.hubA)
        #expect(accessory.registration == .paired)
        #expect(accessory.name == "Studio Pro")
        #expect(accessory.model == "SP-2")
        #expect(accessory.hardwareCapabilities == .all)
        #expect(accessory.configuration == .empty)
        #expect(accessory.updatedAt == F.at(0))
    }

    // MARK: - Lifecycle

    @Test func registerThenUpdateAsInTheSeedsSample() throws {
        var machine = try Self.machine(after: [(Self.pair, F.hubA), (Self.registerAll, F.hubA)])
        #expect(try machine.current().registration == .registered)
        #expect(try machine.current().registeredAt == F.at(1))

        // current → copy → modify → update, as the seeds show.
        var configuration = try machine.current().configuration
        configuration.devicePlacement = .onHead
        configuration.primaryAudioSourceDeviceIdentifier = F.phone.data
        configuration.secondaryAudioSourceDeviceIdentifier = F.laptop.data
        let updated = try machine.apply(.update(configuration), sequence: 7, from: F.hubA, at: F.at(5))
        #expect(updated.configuration == configuration)
        #expect(updated.configuration.audioSources == [F.phone, F.laptop])
        #expect(updated.lastSequence == 7)
        #expect(updated.updatedAt == F.at(5))
        #expect(try machine.current() == updated)
    }

    @Test func reportsUpdateOnePartOfTheConfiguration() throws {
        var machine = try Self.machine(after: [(Self.pair, F.hubA), (Self.registerAll, F.hubA)])
        try machine.apply(.sources(primary: F.phone.data, secondary: F.laptop.data), from: F.hubA, at: F.at(2))
        try machine.apply(.placement(.inEar), from: F.hubA, at: F.at(3))
        var configuration = try machine.current().configuration
        #expect(configuration.devicePlacement == .inEar)
        #expect(configuration.audioSources == [F.phone, F.laptop])

        // An absent (UNSPECIFIED) placement clears it; empty identifiers mean none.
        try machine.apply(.placement(nil), from: F.hubA, at: F.at(4))
        try machine.apply(.sources(primary: F.tv.data, secondary: Data()), from: F.hubA, at: F.at(5))
        configuration = try machine.current().configuration
        #expect(configuration.devicePlacement == nil)
        #expect(configuration.primaryAudioSourceDeviceIdentifier == F.tv.data)
        #expect(configuration.secondaryAudioSourceDeviceIdentifier == nil)
        #expect(configuration.deviceCapabilities == .all)
    }

    @Test func rePairingInvalidatesAndRegisteringAgainKeepsTheSources() throws {
        var machine = try Self.machine(after: [
            (Self.pair, F.hubA), (Self.registerAll, F.hubA),
            (Self.update(placement: .onHead, primary: F.phone.data, secondary: F.laptop.data), F.hubA),
        ])
        let rePaired = try machine.apply(
            .paired(name: "Renamed", model: "SP-3", hardwareCapabilities: .all), from: F.hubA, at: F.at(10))
        #expect(rePaired.registration == .invalidated)
        #expect(rePaired.hub == F.hubA)
        #expect(rePaired.name == "Renamed")

        // Pairing again while invalidated keeps it invalidated.
        #expect(try machine.apply(Self.pair, from: F.hubA, at: F.at(11)).registration == .invalidated)

        // Registering again without .placement: sources kept, placement cleared.
        let registered = try machine.apply(Self.registerSwitching, from: F.hubA, at: F.at(12))
        #expect(registered.registration == .registered)
        #expect(registered.configuration.deviceCapabilities == .audioSwitching)
        #expect(registered.configuration.devicePlacement == nil)
        #expect(registered.configuration.audioSources == [F.phone, F.laptop])
        #expect(registered.registeredAt == F.at(12))
    }

    @Test func registeringAgainWithPlacementKeepsThePlacement() throws {
        var machine = try Self.machine(after: [
            (Self.pair, F.hubA), (Self.registerAll, F.hubA), (Self.update(placement: .inEar), F.hubA),
        ])
        #expect(try machine.apply(Self.registerAll, from: F.hubA, at: F.at(5)).configuration.devicePlacement == .inEar)
    }

    @Test func pairingAgainBeforeRegisteringStaysPaired() throws {
        var machine = try Self.machine(after: [(Self.pair, F.hubA)])
        let again = try machine.apply(Self.pairSwitchingOnly, from: F.hubA, at: F.at(3))
        #expect(again.registration == .paired)
        #expect(again.hub == F.hubA)
        #expect(again.hardwareCapabilities == .audioSwitching)
    }

    @Test func unpairingEndsTheRegistrationAndClearsTheConfiguration() throws {
        var machine = try Self.machine(after: [
            (Self.pair, F.hubA), (Self.registerAll, F.hubA),
            (Self.update(placement: .onHead, primary: F.phone.data), F.hubA),
        ])
        let unpaired = try machine.apply(.unpaired, from: F.hubA, at: F.at(9))
        #expect(unpaired.registration == .unpaired)
        #expect(unpaired.configuration == .empty)
        #expect(unpaired.registeredAt == nil)

        // Unpairing again is harmless: there is nothing left to end. To another hub it is not paired at all.
        #expect(try machine.apply(.unpaired, from: F.hubA, at: F.at(10)).registration == .unpaired)
        #expect(throws: AccessoryControlError.self) { try machine.apply(.unpaired, from: F.hubB, at: F.at(10)) }

        // Pairing again starts over, from any hub: the accessory moves to it.
        let moved = try machine.apply(Self.pair, from: F.hubB, at: F.at(11))
        #expect(moved.registration == .paired)
        #expect(moved.hub == F.hubB)
        #expect(try machine.apply(Self.registerAll, from: F.hubB, at: F.at(12)).configuration.audioSources == [])
    }

    @Test func lastSequenceNeverGoesBack() throws {
        var machine = try Self.machine(after: [(Self.pair, F.hubA), (Self.registerAll, F.hubA)])
        try machine.apply(.placement(.inEar), sequence: 10, from: F.hubA, at: F.at(2))
        #expect(try machine.current().lastSequence == 10)
        try machine.apply(.placement(.onHead), sequence: 0, from: F.hubA, at: F.at(3))
        #expect(try machine.current().lastSequence == 10)
        try machine.apply(.placement(.offHead), sequence: 11, from: F.hubA, at: F.at(4))
        #expect(try machine.current().lastSequence == 11)
        try machine.apply(Self.pair, sequence: 2, from: F.hubA, at: F.at(5))
        #expect(try machine.current().lastSequence == 2, "a pairing is a birth: its sequence restarts the count")
    }

    // MARK: - Diagnostics (the seeds' common mistakes)

    @Test func diagnosesCapabilitiesNotReportedWithinThirtySeconds() throws {
        var machine = AccessoryStateMachine(id: F.headphones)
        try machine.apply(Self.pair, from: F.hubA, at: F.at(0))
        #expect(machine.nextDeadline == nil)
        try machine.apply(Self.registerAll, from: F.hubA, at: F.at(10))
        #expect(machine.nextDeadline == F.at(40))

        let changed = machine.tick(at: F.at(39.999))
        #expect(changed == nil)
        let dueResult = machine.tick(at: F.at(40))
        let due = try #require(dueResult)
        #expect(
            due.diagnostics == [.placementNotReported(after: .seconds(30)), .sourcesNotReported(after: .seconds(30))])
        #expect(due.diagnostics[0].description.contains("no placement was reported within 30 s of registering"))
        #expect(due.diagnostics[1].description.contains("no audio source was reported within 30 s"))
        #expect(machine.nextDeadline == nil, "raised diagnostics need no further timer")

        // Reporting clears each one at once.
        let placed = try machine.apply(.placement(.offHead), from: F.hubA, at: F.at(41))
        #expect(placed.diagnostics == [.sourcesNotReported(after: .seconds(30))])
        let connected = try machine.apply(.sources(primary: F.phone.data, secondary: nil), from: F.hubA, at: F.at(42))
        #expect(connected.diagnostics.isEmpty)

        // Past the grace period, losing the sources raises it again immediately.
        let disconnected = try machine.apply(.sources(primary: nil, secondary: nil), from: F.hubA, at: F.at(50))
        #expect(disconnected.diagnostics == [.sourcesNotReported(after: .seconds(30))])
    }

    @Test func reportingInTimeRaisesNothing() throws {
        var machine = try Self.machine(after: [(Self.pair, F.hubA), (Self.registerAll, F.hubA)])
        try machine.apply(.placement(.onHead), from: F.hubA, at: F.at(5))
        try machine.apply(.sources(primary: F.phone.data, secondary: nil), from: F.hubA, at: F.at(6))
        #expect(machine.nextDeadline == nil)
        let changed = machine.tick(at: F.at(100))
        #expect(changed == nil)
        #expect(try machine.current().diagnostics.isEmpty)
    }

    @Test func diagnosesOnlyDeclaredCapabilities() throws {
        var machine = try Self.machine(after: [(Self.pair, F.hubA), (Self.registerSwitching, F.hubA)])
        let dueResult = machine.tick(at: F.at(31))
        let due = try #require(dueResult)
        #expect(due.diagnostics == [.sourcesNotReported(after: .seconds(30))])
    }

    @Test func theGracePeriodIsAPolicy() throws {
        var policy = AccessoryStateMachine.Policy()
        policy.diagnosticsGracePeriod = .milliseconds(1500)
        var machine = AccessoryStateMachine(id: F.headphones, policy: policy)
        try machine.apply(Self.pair, from: F.hubA, at: F.at(0))
        try machine.apply(Self.registerSwitching, from: F.hubA, at: F.at(0))
        #expect(machine.nextDeadline == F.at(1.5))
        let changed = machine.tick(at: F.at(1.5))
        #expect(changed?.diagnostics.first?.description.contains("within 1500 ms") == true)
    }

    // MARK: - Hub availability

    @Test func anOfflineHubMakesItsAccessoriesStaleUntilItReports() throws {
        var machine = try Self.machine(after: [(Self.pair, F.hubA), (Self.registerAll, F.hubA)])
        let changed = machine.hubAvailabilityChanged(F.hubB, online: false, at: F.at(5))
        #expect(changed == nil, "another hub")
        let staleResult = machine.hubAvailabilityChanged(F.hubA, online: false, at: F.at(5))
        let stale = try #require(staleResult)
        #expect(stale.isStale)
        #expect(stale.diagnostics == [.hubOffline(F.hubA)])
        #expect(stale.diagnostics[0].description.contains("hub hub-a is offline"))
        let again = machine.hubAvailabilityChanged(F.hubA, online: false, at: F.at(6))
        #expect(again == nil, "no change")
        #expect(machine.nextDeadline == F.at(31), "a stale accessory still owes its reports")

        let fresh = try machine.apply(.placement(.inEar), from: F.hubA, at: F.at(7))
        #expect(!fresh.isStale)
        #expect(fresh.diagnostics.isEmpty)

        _ = machine.hubAvailabilityChanged(F.hubA, online: false, at: F.at(8))
        let onlineResult = machine.hubAvailabilityChanged(F.hubA, online: true, at: F.at(9))
        let online = try #require(onlineResult)
        #expect(!online.isStale)
        #expect(online.diagnostics.isEmpty)
    }

    @Test func restoringContinuesFromAKnownState() throws {
        let accessory = Accessory(
            id: F.headphones, hub: F.hubA, registration: .registered, hardwareCapabilities: .all,
            configuration: Configuration(devicePlacement: .inEar, deviceCapabilities: .all), lastSequence: 40,
            updatedAt: F.at(0), registeredAt: F.at(0))
        var machine = AccessoryStateMachine(restoring: accessory)
        #expect(try machine.current() == accessory)
        let next = try machine.apply(.placement(.offHead), sequence: 41, from: F.hubA, at: F.at(1))
        #expect(next.lastSequence == 41)
        #expect(next.configuration.devicePlacement == .offHead)
    }
}

@Suite struct SequenceTrackerTests {
    @Test(arguments: [
        // (last, sequence, isBirth, verdict)
        (UInt64(0), UInt64(0), false, SequenceTracker.Verdict.unsequenced),
        (7, 0, false, .unsequenced),
        (7, 0, true, .unsequenced),
        (0, 1, false, .next),
        (0, 1_763_790_000_000, false, .next),
        (7, 8, false, .next),
        (7, 7, false, .duplicate(last: 7)),
        (7, 3, false, .duplicate(last: 7)),
        (7, 9, false, .gap(missing: 8...8)),
        (7, 20, false, .gap(missing: 8...19)),
        (7, 1, true, .birth),
        (7, 7, true, .birth),
        (7, 100, true, .birth),
        // At the top of the range (found by the fuzzer: `last + 1` trapped there).
        (.max, 1, false, .duplicate(last: .max)),
        (.max, .max, false, .duplicate(last: .max)),
        (.max, 1, true, .birth),
        (.max - 1, .max, false, .next),
        (5, .max, false, .gap(missing: 6...(.max - 1))),
    ])
    func verdicts(_ last: UInt64, _ sequence: UInt64, _ isBirth: Bool, _ verdict: SequenceTracker.Verdict) {
        #expect(SequenceTracker(last: last).verdict(for: sequence, isBirth: isBirth) == verdict)
    }

    @Test func recordingKeepsTheHighestAndABirthRestartsTheCount() {
        var tracker = SequenceTracker()
        tracker.record(5, isBirth: false)
        tracker.record(3, isBirth: false)
        #expect(tracker.last == 5)
        tracker.record(0, isBirth: false)
        #expect(tracker.last == 5, "unsequenced changes nothing")
        tracker.record(1, isBirth: true)
        #expect(tracker.last == 1, "a pairing restarts the count")
        #expect(tracker.verdict(for: 2, isBirth: false) == .next)
    }
}

/// The person's controls (rule 12) on the accessory's state.
@Suite struct AccessoryControlsStateTests {
    typealias F = Fixture

    @Test func controlsAreKeptAndOnlyWhatIsGivenChanges() throws {
        var machine = try AccessoryStateMachineTests.machine(after: [(AccessoryStateMachineTests.pair, F.hubA)])
        var accessory = try machine.setControls(AccessoryControls(automaticSwitching: false), at: F.at(5))
        #expect(!accessory.automaticSwitching)
        #expect(accessory.pinnedSource == nil)
        #expect(accessory.updatedAt == F.at(5))
        accessory = try machine.setControls(AccessoryControls(pin: .source(F.phone)), at: F.at(6))
        #expect(!accessory.automaticSwitching, "left as it was")
        #expect(accessory.pinnedSource == F.phone)
        accessory = try machine.setControls(AccessoryControls(automaticSwitching: true, pin: .automatic), at: F.at(7))
        #expect(accessory.automaticSwitching)
        #expect(accessory.pinnedSource == nil)
    }

    @Test func unpairingForgetsTheControls() throws {
        var machine = try AccessoryStateMachineTests.machine(after: [(AccessoryStateMachineTests.pair, F.hubA)])
        try machine.setControls(AccessoryControls(automaticSwitching: false, pin: .source(F.phone)), at: F.at(5))
        try machine.apply(.unpaired, from: F.hubA, at: F.at(6))
        try machine.apply(AccessoryStateMachineTests.pair, from: F.hubA, at: F.at(7))
        let accessory = try #require(machine.accessory)
        #expect(accessory.automaticSwitching)
        #expect(accessory.pinnedSource == nil)
    }

    @Test func anAccessoryThatIsNotPairedHasNoControls() throws {
        var never = AccessoryStateMachine(id: F.headphones)
        #expect(throws: AccessoryControlError.self) {
            try never.setControls(AccessoryControls(automaticSwitching: false), at: F.at(1))
        }
        var unpaired = try AccessoryStateMachineTests.machine(after: [
            (AccessoryStateMachineTests.pair, F.hubA), (.unpaired, F.hubA),
        ])
        do {
            try unpaired.setControls(AccessoryControls(automaticSwitching: false), at: F.at(3))
            Issue.record("controls of an unpaired accessory were accepted")
        } catch {
            #expect(error.code == .invalidRequest)
            #expect(error.reason.contains("not paired"))
        }
    }
}
