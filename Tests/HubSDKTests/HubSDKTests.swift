import AccessoryModel
@testable import AccessoryWire
import CAudioHub
import Foundation
import Logging
import MQTTClient
import Synchronization
import Testing
import TestSupport

#if canImport(Glibc)
import Glibc
#endif

/// The C hub SDK against a real mosquitto and the real bridge process: every operation, every AudioAccessoryKit
/// error reaching the completion callback, duplicates with their original outcome, a sequence behind the bridge's,
/// rebirths answered from the cache, retries until a result, reconnection, the hub status and its will, the
/// queue bound, local refusals, TLS. Serialized: each test runs a broker and a bridge.
@Suite(.serialized) struct HubSDKTests {
    static let headphones = [UInt8]([0x12, 0x34, 0x56, 0x78, 0x9A, 0xBC])
    static let laptop = [UInt8]([0xDE, 0xF0, 0x01, 0x23, 0x45, 0x67])

    /// Pairs (both capabilities) and registers `accessory`; both must succeed.
    static func pairAndRegister(_ hub: TestHub, _ accessory: String, capabilities: UInt32 = AUDIOHUB_CAP_ALL) async throws {
        let paired = try await hub.perform {
            audiohub_pair($0, accessory, "Studio Pro", "SP-2", AUDIOHUB_CAP_ALL, $1, $2)
        }
        #expect(paired.succeeded, "pair: \(paired.message)")
        let registered = try await hub.perform { audiohub_register($0, accessory, capabilities, $1, $2) }
        #expect(registered.succeeded, "register: \(registered.message)")
    }

    // MARK: Every operation

    @Test func everyOperationCompletesOnceWithTheBridgesState() async throws {
        let fixture = try await BridgeFixture()
        let hub = try TestHub("sdk-hub", broker: fixture.broker)
        let id = "ops-headphones"

        let paired = try await hub.perform { audiohub_pair($0, id, "Studio Pro", "SP-2", AUDIOHUB_CAP_ALL, $1, $2) }
        #expect(paired.succeeded && paired.operation == AUDIOHUB_OP_PAIR.rawValue && paired.accessoryID == id)
        #expect(paired.state?.registration == AUDIOHUB_REGISTRATION_PAIRED.rawValue)
        #expect(paired.state?.name == "Studio Pro" && paired.state?.model == "SP-2")
        #expect(paired.state?.hardwareCapabilities == AUDIOHUB_CAP_ALL && paired.state?.hubID == "sdk-hub")

        let registered = try await hub.perform { audiohub_register($0, id, AUDIOHUB_CAP_ALL, $1, $2) }
        #expect(registered.succeeded && registered.state?.registration == AUDIOHUB_REGISTRATION_REGISTERED.rawValue)
        #expect(registered.sequence == paired.sequence + 1, "one sequence per request")

        var configuration = audiohub_configuration()
        configuration.capabilities = AUDIOHUB_CAP_ALL
        configuration.placement = AUDIOHUB_PLACEMENT_OVER_THE_EAR
        configuration.primary = address(Self.headphones)
        configuration.secondary = address(Self.laptop)
        let updated = try await hub.perform { audiohub_update($0, id, &configuration, $1, $2) }
        #expect(updated.succeeded && updated.state?.placement == AUDIOHUB_PLACEMENT_OVER_THE_EAR.rawValue)
        #expect(updated.state?.primary == Self.headphones && updated.state?.secondary == Self.laptop)

        let placed = try await hub.perform { audiohub_placement($0, id, AUDIOHUB_PLACEMENT_IN_EAR, $1, $2) }
        #expect(placed.succeeded && placed.state?.placement == AUDIOHUB_PLACEMENT_IN_EAR.rawValue)

        var primary = address(Self.laptop)
        let sourced = try await hub.perform { audiohub_sources($0, id, &primary, nil, $1, $2) }
        #expect(sourced.succeeded && sourced.state?.primary == Self.laptop && sourced.state?.secondary == [])

        // The cache holds what succeeded.
        let cached = try #require(hub.accessory(id))
        #expect(cached.paired && cached.registered && cached.hardware_capabilities == AUDIOHUB_CAP_ALL)
        #expect(cached.configuration.placement == AUDIOHUB_PLACEMENT_IN_EAR)
        #expect(bytes(of: cached.configuration.primary) == Self.laptop && cached.configuration.secondary.length == 0)
        #expect(cached.last_sequence == sourced.sequence && cached.queued == 0)

        let unpaired = try await hub.perform { audiohub_unpair($0, id, $1, $2) }
        #expect(unpaired.succeeded && unpaired.state?.registration == AUDIOHUB_REGISTRATION_UNPAIRED.rawValue)
        #expect(hub.accessory(id)?.paired == false)

        // Exactly one completion each, sent once each: nothing else arrives. The bridge answers a hub's requests in
        // order on one connection, so once a last request's answer is in, any second answer to the six came before it.
        let marker = try await hub.perform { audiohub_placement($0, "never-paired", AUDIOHUB_PLACEMENT_ON_HEAD, $1, $2) }
        #expect(marker.error == AUDIOHUB_KIT_INVALID_REQUEST.rawValue)
        let all = hub.recorder.completions.withLock { $0.filter { $0.token != marker.token } }
        #expect(all.count == 6)
        #expect(Set(all.map(\.token)).count == 6)
        #expect(all.allSatisfy { $0.attempts == 1 && !$0.duplicate })
        #expect(hub.stats.requests == 7 && hub.stats.completed == 7 && hub.stats.publishes == 7 && hub.stats.resends == 0)
        #expect(hub.stats.stray_results == 0)
        #expect(all.map(\.requestID).allSatisfy { $0.hasPrefix("\(id).") })
    }

    @Test func requestsOfOneAccessoryGoOneAtATimeInOrder() async throws {
        let fixture = try await BridgeFixture()
        let hub = try TestHub("sdk-order", broker: fixture.broker)
        let id = "ordered"
        try await Self.pairAndRegister(hub, id)
        let placements = [AUDIOHUB_PLACEMENT_ON_HEAD, AUDIOHUB_PLACEMENT_OFF_HEAD, AUDIOHUB_PLACEMENT_IN_EAR]
        let tokens = try (0..<60).map { index in
            try hub.request { audiohub_placement($0, id, placements[index % 3], $1, $2) }
        }
        #expect(hub.accessory(id)?.queued ?? 0 > 1, "queued behind the one in flight")
        var sequences: [UInt64] = []
        for token in tokens {
            let done = try await hub.completion(token)
            #expect(done.succeeded)
            sequences.append(done.sequence)
        }
        #expect(sequences == Array(sequences.first!..<(sequences.first! + 60)), "consecutive, in request order")
        let order = hub.recorder.completions.withLock { $0.suffix(60).map(\.token) }
        #expect(order == tokens, "completed in request order")
        let last = try #require(hub.completions(of: tokens.last!).first?.state)
        #expect(last.placement == placements[59 % 3].rawValue && last.lastSequence == sequences.last)
    }

    // MARK: Every error code

    @Test func everyErrorTheBridgeGivesReachesTheCompletion() async throws {
        let fixture = try await BridgeFixture()
        let hub = try TestHub("sdk-errors", broker: fixture.broker)
        let other = try TestHub("sdk-other", broker: fixture.broker)

        // invalidRequest: a placement for an accessory never paired (no state: unknown to the hub).
        let unknown = try await hub.perform { audiohub_placement($0, "never-paired", AUDIOHUB_PLACEMENT_ON_HEAD, $1, $2) }
        #expect(unknown.status == AUDIOHUB_ERR_SUCCESS.rawValue && unknown.error == AUDIOHUB_KIT_INVALID_REQUEST.rawValue)
        #expect(unknown.message.contains("never-paired") && unknown.state == nil && !unknown.duplicate)

        // accessoryNotCapable: registering placement on hardware that only switches audio.
        let paired = try await hub.perform {
            audiohub_pair($0, "switch-only", "Buds", "B-1", AUDIOHUB_CAP_AUDIO_SWITCHING, $1, $2)
        }
        #expect(paired.succeeded)
        let notCapable = try await hub.perform { audiohub_register($0, "switch-only", AUDIOHUB_CAP_ALL, $1, $2) }
        #expect(notCapable.error == AUDIOHUB_KIT_ACCESSORY_NOT_CAPABLE.rawValue, "\(notCapable.message)")
        #expect(notCapable.state?.registration == AUDIOHUB_REGISTRATION_PAIRED.rawValue)
        #expect(notCapable.state?.lastError == AUDIOHUB_KIT_ACCESSORY_NOT_CAPABLE.rawValue)
        #expect(hub.accessory("switch-only")?.registered == false, "a failure changes nothing in the cache")

        // invalidated: paired again while registered, then a placement.
        try await Self.pairAndRegister(hub, "repaired")
        #expect(try await hub.perform { audiohub_pair($0, "repaired", "Studio Pro", "SP-2", AUDIOHUB_CAP_ALL, $1, $2) }
            .succeeded)
        let invalidated = try await hub.perform { audiohub_placement($0, "repaired", AUDIOHUB_PLACEMENT_ON_HEAD, $1, $2) }
        #expect(invalidated.error == AUDIOHUB_KIT_INVALIDATED.rawValue, "\(invalidated.message)")
        #expect(invalidated.state?.registration == AUDIOHUB_REGISTRATION_INVALIDATED.rawValue)

        // invalidRequest from another hub: the accessory belongs to sdk-errors; no state comes back.
        let foreign = try await other.perform { audiohub_placement($0, "repaired", AUDIOHUB_PLACEMENT_OFF_HEAD, $1, $2) }
        #expect(foreign.error == AUDIOHUB_KIT_INVALID_REQUEST.rawValue && foreign.state == nil)
        #expect(foreign.message.contains("another hub"), "\(foreign.message)")

        // invalidRequest: a full update with capabilities other than the registered ones.
        try await Self.pairAndRegister(hub, "switching", capabilities: AUDIOHUB_CAP_AUDIO_SWITCHING)
        var configuration = audiohub_configuration()
        configuration.capabilities = AUDIOHUB_CAP_ALL
        let mismatch = try await hub.perform { audiohub_update($0, "switching", &configuration, $1, $2) }
        #expect(mismatch.error == AUDIOHUB_KIT_INVALID_REQUEST.rawValue && mismatch.state != nil)
    }

    /// The bridge never answers `unknown`, nor the "no longer kept" outcome of an old duplicate, to a hub that
    /// sends one request at a time: a stand-in answers instead, as the contract allows.
    @Test(arguments: [
        (AUDIOHUB_KIT_UNKNOWN.rawValue, false, "the bridge's disk is full"),
        (AUDIOHUB_KIT_UNSPECIFIED.rawValue, true, "sequence 3 was processed before; its outcome is no longer kept"),
    ])
    func unknownAndUnspecifiedReachTheCompletion(error: UInt32, duplicate: Bool, message: String) async throws {
        let broker = try await MosquittoBroker()
        var configuration = MQTTConfiguration(clientID: "stand-in")
        configuration.port = broker.port
        let standIn = try MQTTClient(configuration: configuration, logger: Logger(label: "stand-in"))
        do {
            try await Self.answerAsAStandIn(standIn, broker: broker, error: error, duplicate: duplicate, message: message)
        } catch {
            await standIn.close()
            throw error
        }
        await standIn.close()
    }

    private static func answerAsAStandIn(
        _ standIn: MQTTClient, broker: MosquittoBroker, error: UInt32, duplicate: Bool, message: String
    ) async throws {
        try standIn.subscribe("audio/hubs/+/accessories/+/telemetry")
        let codec = WireCodec()
        try standIn.start { [standIn] request in
            // Answers as the bridge would: on the response topic, with the correlation data, the request's id and
            // sequence. It answers only requests that say they are protobuf.
            guard request.properties.contentType == "application/protobuf",
                let telemetry = try? codec.decode(
                    Audioaccessory_V1_AccessoryTelemetry.self, from: request.payload, format: .protobuf),
                let topic = request.properties.responseTopic
            else { return }
            let result = Audioaccessory_V1_RequestResult.with {
                $0.requestID = telemetry.requestID
                $0.sequence = telemetry.sequence
                $0.error = Audioaccessory_V1_ErrorCode(rawValue: Int(error))!
                $0.message = message
                $0.duplicate = duplicate
            }
            try? standIn.publish(MQTTMessage(
                topic: topic, payload: (try? result.serializedBytes()) ?? [],
                properties: MQTTProperties(correlationData: request.properties.correlationData)))
        }
        try await standIn.waitUntilConnected()
        // Its subscription is in place once the broker logs it: the hub's first request must not go unheard.
        try await broker.waitForLog("stand-in 1 audio/hubs/+/accessories/+/telemetry")
        let hub = try TestHub("sdk-stand-in", broker: broker, timeoutMs: 5000)
        let done = try await hub.perform { audiohub_placement($0, "anything", AUDIOHUB_PLACEMENT_ON_HEAD, $1, $2) }
        #expect(done.status == AUDIOHUB_ERR_SUCCESS.rawValue && done.error == error)
        #expect(done.duplicate == duplicate && done.state == nil && done.message == message)
        #expect(done.requestID.hasPrefix("anything.") && done.attempts == 1)
    }

    /// In a cluster (docs/scale-out.md) the hub's topics are under its slot's root, computed as the bridges compute it,
    /// and a result of an older owner of the slot is a stray: the request goes again, and the newer owner's answer
    /// completes it.
    @Test func inAClusterTheHubTalksToItsSlotAndDropsAnOlderOwnersResult() async throws {
        let broker = try await MosquittoBroker()
        for id in ["hub-1", "sdk-slots", "", "ä-ü"] {
            #expect(audiohub_slot(id, 12) == ClusterSlots(12)!.slot(of: HubID(id) ?? HubID("x")!) || HubID(id) == nil)
        }
        // Households: the domain ends at the first "--".
        for id in ["home-17--kitchen", "home-17--bedroom", "a---b", "--x", "x--", "a-b-c"] {
            let hub = try #require(HubID(id))
            for slots in [12, 64, 4096] {
                #expect(audiohub_slot(id, slots) == ClusterSlots(slots)!.slot(of: hub), "\(id) in \(slots) slots")
            }
        }
        #expect(audiohub_slot("hub-1", 0) == -1 && audiohub_slot(nil, 12) == -1 && audiohub_slot("hub-1", 4097) == -1)
        let slot = ClusterSlots(12)!.slot(of: HubID("sdk-slots")!)
        var configuration = MQTTConfiguration(clientID: "owners")
        configuration.port = broker.port
        let owners = try MQTTClient(configuration: configuration, logger: Logger(label: "owners"))
        do {
            try await Self.answerAsTwoOwners(owners, of: slot, broker: broker)
        } catch {
            await owners.close()
            throw error
        }
        await owners.close()
    }

    private static func answerAsTwoOwners(_ owners: MQTTClient, of slot: Int, broker: MosquittoBroker) async throws {
        let filter = "audio/slots/\(slot)/hubs/sdk-slots/accessories/+/telemetry"
        try owners.subscribe(filter)
        let answered = Mutex(0)
        try owners.start { [owners] request in
            guard let telemetry = try? WireCodec().decode(
                Audioaccessory_V1_AccessoryTelemetry.self, from: request.payload, format: .protobuf),
                let topic = request.properties.responseTopic, topic.hasPrefix("audio/slots/\(slot)/hubs/sdk-slots/")
            else { return }
            // The first send is answered by an owner cut off since (epoch 3) after the new one (epoch 7) answered
            // an earlier request; the resend by the new owner.
            let count = answered.withLock { $0 += 1; return $0 }
            let result = Audioaccessory_V1_RequestResult.with {
                $0.requestID = telemetry.requestID
                $0.sequence = telemetry.sequence
                $0.error = .none
                $0.epoch = count == 2 ? 3 : 7
            }
            try? owners.publish(MQTTMessage(
                topic: topic, payload: (try? result.serializedBytes()) ?? [],
                properties: MQTTProperties(correlationData: request.properties.correlationData)))
        }
        try await owners.waitUntilConnected()
        try await broker.waitForLog("owners 1 \(filter)")
        let hub = try TestHub("sdk-slots", broker: broker, timeoutMs: 300) {
            #expect(audiohub_int_option($0, AUDIOHUB_OPT_SLOTS, 12) == AUDIOHUB_ERR_SUCCESS)
            #expect(audiohub_int_option($0, AUDIOHUB_OPT_SLOTS, 4097) == AUDIOHUB_ERR_INVAL)
        }
        let first = try await hub.perform { audiohub_placement($0, "buds", AUDIOHUB_PLACEMENT_ON_HEAD, $1, $2) }
        #expect(first.succeeded && first.epoch == 7 && first.attempts == 1)
        let second = try await hub.perform { audiohub_placement($0, "buds", AUDIOHUB_PLACEMENT_OFF_HEAD, $1, $2) }
        #expect(second.succeeded && second.epoch == 7 && second.attempts == 2, "the older owner's answer completed it")
        #expect(hub.stats.stray_results == 1)
    }

    // MARK: Duplicates, sequences, rebirths

    @Test func aRepeatedSequenceCompletesWithTheOriginalOutcomeAsADuplicate() async throws {
        let fixture = try await BridgeFixture()
        let id = "dup-buds"
        var failedSequence: UInt64 = 0
        var originalMessage = ""
        do {
            let first = try TestHub("sdk-dup", broker: fixture.broker, persistSequences: true)
            try await Self.pairAndRegister(first, id, capabilities: AUDIOHUB_CAP_AUDIO_SWITCHING)
            // Registered without placement: a placement fails with accessoryNotCapable.
            let failed = try await first.perform { audiohub_placement($0, id, AUDIOHUB_PLACEMENT_ON_HEAD, $1, $2) }
            #expect(failed.error == AUDIOHUB_KIT_ACCESSORY_NOT_CAPABLE.rawValue)
            failedSequence = failed.sequence
            originalMessage = failed.message
            // The save hook saw every sequence before it was sent.
            let saved = first.recorder.savedSequences.withLock { $0.filter { $0.0 == id }.map(\.1) }
            #expect(saved == [failedSequence - 2, failedSequence - 1, failedSequence])
        }
        // The hub restarts and restores a count one behind: its next request repeats the last sequence, as a hub that
        // crashed before it saw the result would. The bridge answers it as a duplicate, with the original outcome.
        let restarted = try TestHub("sdk-dup", broker: fixture.broker, persistSequences: true)
        restarted.recorder.storedSequences.withLock { $0[id] = failedSequence - 1 }
        let repeated = try await restarted.perform { audiohub_placement($0, id, AUDIOHUB_PLACEMENT_ON_HEAD, $1, $2) }
        #expect(repeated.sequence == failedSequence)
        #expect(repeated.duplicate && repeated.error == AUDIOHUB_KIT_ACCESSORY_NOT_CAPABLE.rawValue)
        #expect(repeated.message == originalMessage)
        #expect(repeated.state?.lastSequence == failedSequence)
    }

    @Test func aCountBehindTheBridgesMovesPastItAndTheRequestApplies() async throws {
        let fixture = try await BridgeFixture()
        let id = "behind"
        var last: UInt64 = 0
        do {
            let first = try TestHub("sdk-behind", broker: fixture.broker)
            try await Self.pairAndRegister(first, id)
            last = try await first.perform { audiohub_placement($0, id, AUDIOHUB_PLACEMENT_ON_HEAD, $1, $2) }.sequence
        }
        // Restored three behind (a stale backup): the first send is a duplicate of an old sequence.
        let restarted = try TestHub("sdk-behind", broker: fixture.broker, persistSequences: true)
        restarted.recorder.storedSequences.withLock { $0[id] = last - 3 }
        let done = try await restarted.perform { audiohub_placement($0, id, AUDIOHUB_PLACEMENT_OFF_HEAD, $1, $2) }
        #expect(done.succeeded && !done.duplicate, "\(done.message)")
        #expect(done.sequence == last + 1 && done.state?.placement == AUDIOHUB_PLACEMENT_OFF_HEAD.rawValue)
        #expect(restarted.stats.resyncs == 1)
    }

    @Test func aRebirthRequestIsAnsweredFromTheCache() async throws {
        let fixture = try await BridgeFixture()
        let id = "reborn"
        var last: UInt64 = 0
        do {
            let first = try TestHub("sdk-rebirth", broker: fixture.broker)
            try await Self.pairAndRegister(first, id)
            var primary = address(Self.headphones)
            _ = try await first.perform { audiohub_sources($0, id, &primary, nil, $1, $2) }
            last = try await first.perform { audiohub_placement($0, id, AUDIOHUB_PLACEMENT_ON_HEAD, $1, $2) }.sequence
        }
        // The hub restarts and restores a count 5 ahead: the bridge sees a gap and asks for a rebirth. The new
        // handle knows the accessory from the bridge's first result (so the bridge has its pairing and registration),
        // and answers with the configuration alone: an update, no pair that would invalidate the registration.
        let observer = try await Observer(fixture.broker)
        let restarted = try TestHub("sdk-rebirth", broker: fixture.broker, persistSequences: true)
        restarted.recorder.storedSequences.withLock { $0[id] = last + 5 }
        let placed = try await restarted.perform { audiohub_placement($0, id, AUDIOHUB_PLACEMENT_IN_EAR, $1, $2) }
        #expect(placed.succeeded && placed.sequence == last + 6)
        try await waitUntil("the rebirth request", timeout: .seconds(10)) { restarted.stats.rebirths == 1 }
        try await restarted.waitUntilIdle()
        let rebirths = restarted.recorder.rebirths.withLock { $0 }
        #expect(rebirths.count == 1 && rebirths.first?.answered == true && rebirths.first?.accessory == id)
        #expect(rebirths.first?.last == last && rebirths.first?.received == last + 6)
        #expect(restarted.stats.rebirth_requests == 1)
        let cached = try #require(restarted.accessory(id))
        #expect(cached.last_sequence == last + 7, "the update after the placement")
        // The retained state is the cache: registered, in ear, the headphones as primary, last sequence the update's.
        let state = try await retainedState(fixture.broker, id)
        #expect(state.registration == .registered && state.configuration.devicePlacement == .inEar)
        #expect([UInt8](state.configuration.primaryAudioSourceDeviceIdentifier) == Self.headphones)
        #expect(state.lastSequence == last + 7 && state.name == "Studio Pro")
        let registrations = try observer.messages.filter { $0.topic == "audio/accessories/\(id)/state" && !$0.payload.isEmpty }
            .map { try Audioaccessory_V1_AccessoryState(serializedBytes: $0.payload).registration }
        #expect(!registrations.isEmpty && !registrations.contains(.invalidated), "\(registrations)")
        await observer.close()
        // The rebirth's requests had no callback: only the placement completed.
        #expect(restarted.recorder.completions.withLock { $0.count } == 1)
    }

    @Test func withoutPersistenceTheWallClockStartsTheCount() async throws {
        let fixture = try await BridgeFixture()
        let hub = try TestHub("sdk-clock", broker: fixture.broker)
        let before = UInt64(Date().timeIntervalSince1970 * 1000)
        let paired = try await hub.perform { audiohub_pair($0, "clocked", "A", "B", AUDIOHUB_CAP_ALL, $1, $2) }
        let after = UInt64(Date().timeIntervalSince1970 * 1000)
        #expect(paired.succeeded && (before...after).contains(paired.sequence))
    }

    // MARK: Retries, reconnection, statuses

    @Test func aRequestIsSentAgainUntilItsResultArrivesAndCompletesOnce() async throws {
        let fixture = try await BridgeFixture()
        let hub = try TestHub("sdk-retry", broker: fixture.broker, timeoutMs: 100)
        try await Self.pairAndRegister(hub, "patient")
        // Stopped (the kernel says so) before the request leaves: nothing can answer it until it goes on.
        try await fixture.pauseBridge(true)
        let token = try hub.request { audiohub_placement($0, "patient", AUDIOHUB_PLACEMENT_ON_HEAD, $1, $2) }
        try await waitUntil("three resends") { hub.stats.resends >= 3 }
        #expect(hub.completions(of: token).isEmpty)
        try await fixture.pauseBridge(false)
        let done = try await hub.completion(token)
        #expect(done.succeeded && done.attempts >= 4)
        // Every copy is answered: the first answer completed it, the others are strays (duplicates); then nothing is
        // in flight, and it completed once. One state change.
        try await waitUntil("an answer to every copy") { hub.stats.stray_results >= UInt64(done.attempts - 1) }
        #expect(hub.completions(of: token).count == 1)
        #expect(hub.stats.duplicates >= 1)
        let state = try await retainedState(fixture.broker, "patient")
        #expect(state.lastSequence == done.sequence && state.configuration.devicePlacement == .onHead)
    }

    @Test func requestsSurviveABrokerRestartAndABridgeKill() async throws {
        let fixture = try await BridgeFixture(persistence: true)
        let hub = try TestHub("sdk-outage", broker: fixture.broker, timeoutMs: 200)
        try await Self.pairAndRegister(hub, "durable")
        try await fixture.killBridge()
        await fixture.broker.stop()
        let token = try hub.request { audiohub_placement($0, "durable", AUDIOHUB_PLACEMENT_OFF_HEAD, $1, $2) }
        try await waitUntil("the hub sees the broker gone") { !audiohub_is_connected(hub.handle) }
        try await fixture.broker.restart()
        try await hub.waitUntilConnected()
        try await fixture.startBridge()
        let done = try await hub.completion(token)
        #expect(done.succeeded && done.state?.placement == AUDIOHUB_PLACEMENT_OFF_HEAD.rawValue)
        #expect(hub.stats.connections == 2)
        #expect(hub.recorder.connects.withLock { $0 } == [0, 0])
    }

    /// The bridge's hub offline grace is 1 s here (10 s by default): BridgeIntegrationTests'
    /// aHubsWillMakesItsAccessoriesStaleUntilItIsBack tests the grace itself.
    @Test func theHubStatusIsRetainedOnlineAndItsWillSaysOfflineWhenTheHubIsKilled() async throws {
        let fixture = try await BridgeFixture(bridgeArguments: ["--hub-offline-grace", "1"])
        let status = "audio/hubs/will-hub-0/status"
        let simulator = try ChildProcess(
            executable: try BuiltProducts.path("hub-sim"),
            arguments: ["--broker", "mqtt://127.0.0.1:\(fixture.broker.port)", "--prefix", "will", "--accessories", "2",
                        "--rate", "2", "--seconds", "120", "--quiet"],
            outputPath: fixture.broker.directory.appendingPathComponent("hub-sim.log").path)
        try await waitUntil("hub-sim's status", timeout: .seconds(20)) {
            (try? await hubStatus(fixture.broker, status))?.online == true
        }
        let online = try await hubStatus(fixture.broker, status)
        #expect(online.online && online.sinceUnixMs > 0)
        // Its accessories are set up and fresh.
        try await waitUntil("an accessory state", timeout: .seconds(20)) {
            (try? await retainedState(fixture.broker, "will-h0-a0"))?.registration == .registered
        }
        simulator.signal(SIGKILL)
        _ = try await simulator.exit()
        try await waitUntil("the will", timeout: .seconds(10)) { (try? await hubStatus(fixture.broker, status))?.online == false }
        // The bridge marks the killed hub's accessories stale.
        try await waitUntil("stale accessories", timeout: .seconds(10)) {
            (try? await retainedState(fixture.broker, "will-h0-a0"))?.stale == true
        }
    }

    @Test func aGracefulDisconnectRetainsOfflineAndSendsNoWill() async throws {
        let broker = try await MosquittoBroker()
        let hub = try TestHub("sdk-bye", broker: broker)
        try await hub.waitUntilConnected()
        #expect(try await hubStatus(broker, "audio/hubs/sdk-bye/status").online)
        let offset = broker.logLength
        #expect(audiohub_disconnect(hub.handle) == AUDIOHUB_ERR_SUCCESS)
        #expect(audiohub_loop_stop(hub.handle, false) == AUDIOHUB_ERR_SUCCESS)
        try await broker.waitForLog("Client sdk-bye disconnected.", after: offset)
        let offline = try await hubStatus(broker, "audio/hubs/sdk-bye/status")
        #expect(!offline.online && offline.sinceUnixMs > 0)
        #expect(audiohub_loop(hub.handle, 0) == AUDIOHUB_ERR_NO_CONN)
    }

    // MARK: Bounds and refusals

    @Test func theQueueIsBoundedAndDestroyCancelsWhatIsLeft() throws {
        let recorder: HubRecorder
        do {
            let hub = try TestHub("sdk-queue", broker: nil) {
                _ = audiohub_int_option($0, AUDIOHUB_OPT_QUEUE_LIMIT, 3)
            }
            recorder = hub.recorder
            for index in 0..<3 {
                try hub.request { audiohub_placement($0, "q\(index % 2)", AUDIOHUB_PLACEMENT_ON_HEAD, $1, $2) }
            }
            #expect(audiohub_placement(hub.handle, "q9", AUDIOHUB_PLACEMENT_ON_HEAD, nil, nil) == AUDIOHUB_ERR_QUEUE_FULL)
            #expect(hub.stats.queued == 3 && hub.stats.requests == 3)
            #expect(hub.accessory("q0")?.queued == 2 && hub.accessory("q9") == nil)
            #expect(audiohub_int_option(hub.handle, AUDIOHUB_OPT_QUEUE_LIMIT, 0) == AUDIOHUB_ERR_INVAL)
            #expect(recorder.completions.withLock { $0.isEmpty }, "nothing completes before destroy")
        }
        // Destroying the hub completed the three requests, cancelled, never sent.
        let completions = recorder.completions.withLock { $0 }
        #expect(completions.count == 3)
        #expect(completions.allSatisfy { $0.status == AUDIOHUB_ERR_CANCELLED.rawValue && $0.attempts == 0 })
    }

    /// The loop polls: a hub whose socket's number is past select's FD_SETSIZE (a process with many files open)
    /// works as any other (through mosquitto_loop's select, it never connected).
    @Test func aSocketNumberedPastFDSetSizeWorks() async throws {
        let fixture = try await BridgeFixture()
        // Fill the descriptors below 1,030, so that the hub's socket, made by its loop, comes after them (they stay
        // open until the end: nothing else in this process selects).
        var fillers: [Int32] = []
        defer { fillers.forEach { close($0) } }
        // Opens until a descriptor past 1,030 comes (the lowest free one comes first): every one below is taken then.
        func fill() throws {
            while true {
                let descriptor = open("/dev/null", O_RDONLY)
                guard descriptor >= 0 else { throw TestFailure("open: errno \(errno)") }
                fillers.append(descriptor)
                if descriptor >= 1030 { return }
            }
        }
        // The tests that run beside this one close descriptors of their own meanwhile: a hub whose socket took one of
        // those, below FD_SETSIZE, proves nothing, and the holes are filled again for another hub.
        for attempt in 1...5 {
            try fill()
            let hub = try TestHub("sdk-fdsetsize-\(attempt)", broker: fixture.broker)
            try await Self.pairAndRegister(hub, "far-headphones-\(attempt)")
            if audiohub_socket(hub.handle) >= 1024 { return }
        }
        Issue.record("in 5 attempts, no hub's socket was past FD_SETSIZE: other tests kept freeing descriptors below it")
    }

    @Test func aRequestOutOfAttemptsCompletesWithATimeout() async throws {
        let broker = try await MosquittoBroker()  // no bridge: nothing answers
        let hub = try TestHub("sdk-timeout", broker: broker, timeoutMs: 50) {
            _ = audiohub_int_option($0, AUDIOHUB_OPT_MAX_ATTEMPTS, 3)
        }
        let done = try await hub.perform { audiohub_placement($0, "lonely", AUDIOHUB_PLACEMENT_ON_HEAD, $1, $2) }
        #expect(done.status == AUDIOHUB_ERR_TIMEOUT.rawValue && done.attempts == 3)
        #expect(done.error == AUDIOHUB_KIT_UNSPECIFIED.rawValue && done.state == nil)
        // The next request of that accessory goes out.
        try hub.request { audiohub_unpair($0, "lonely", $1, $2) }
        try await waitUntil("the next request sent") { hub.stats.publishes >= 4 }
    }

    @Test func badInputIsRefusedBeforeAnythingIsSent() async throws {
        let broker = try await MosquittoBroker()
        let hub = try TestHub("sdk-refuse", broker: broker)
        try await hub.waitUntilConnected()
        // -F %t: topics only (the binary payloads are not text).
        let subscriber = try await broker.startSubscriber(
            topic: "audio/hubs/sdk-refuse/accessories/+/telemetry", count: 1, timeout: .seconds(30),
            arguments: ["-F", "%t"])
        let h = hub.handle
        var five = address([1, 2, 3, 4, 5])
        var six = address(Self.headphones)
        var none = address([])
        var configuration = audiohub_configuration()
        configuration.capabilities = AUDIOHUB_CAP_ALL
        var badPlacement = configuration
        badPlacement.placement = audiohub_placement(rawValue: 9)
        var badCapabilities = configuration
        badCapabilities.capabilities = 0x10
        var secondaryOnly = configuration
        secondaryOnly.secondary = six
        let long = String(repeating: "x", count: 257)
        let refusals: [(audiohub_err, audiohub_err)] = [
            (audiohub_placement(h, "", AUDIOHUB_PLACEMENT_ON_HEAD, nil, nil), AUDIOHUB_ERR_ACCESSORY_ID),
            (audiohub_placement(h, "a/b", AUDIOHUB_PLACEMENT_ON_HEAD, nil, nil), AUDIOHUB_ERR_ACCESSORY_ID),
            (audiohub_placement(h, "a+b", AUDIOHUB_PLACEMENT_ON_HEAD, nil, nil), AUDIOHUB_ERR_ACCESSORY_ID),
            (audiohub_placement(h, String(repeating: "a", count: 65), AUDIOHUB_PLACEMENT_ON_HEAD, nil, nil),
             AUDIOHUB_ERR_ACCESSORY_ID),
            (audiohub_unpair(h, "caf\u{e9}", nil, nil), AUDIOHUB_ERR_ACCESSORY_ID),
            (audiohub_sources(h, "ok", &five, nil, nil, nil), AUDIOHUB_ERR_ADDRESS),
            (audiohub_sources(h, "ok", &six, &five, nil, nil), AUDIOHUB_ERR_ADDRESS),
            (audiohub_sources(h, "ok", &none, &six, nil, nil), AUDIOHUB_ERR_ADDRESS),
            (audiohub_sources(h, "ok", &six, &six, nil, nil), AUDIOHUB_ERR_ADDRESS),
            (audiohub_update(h, "ok", &secondaryOnly, nil, nil), AUDIOHUB_ERR_ADDRESS),
            (audiohub_update(h, "ok", &badCapabilities, nil, nil), AUDIOHUB_ERR_CAPABILITIES),
            (audiohub_update(h, "ok", &badPlacement, nil, nil), AUDIOHUB_ERR_INVAL),
            (audiohub_update(h, "ok", nil, nil, nil), AUDIOHUB_ERR_INVAL),
            (audiohub_register(h, "ok", 0, nil, nil), AUDIOHUB_ERR_CAPABILITIES),
            (audiohub_register(h, "ok", 0x20, nil, nil), AUDIOHUB_ERR_CAPABILITIES),
            (audiohub_pair(h, "ok", "n", "m", 0x10, nil, nil), AUDIOHUB_ERR_CAPABILITIES),
            (audiohub_pair(h, "ok", long, "m", AUDIOHUB_CAP_ALL, nil, nil), AUDIOHUB_ERR_TEXT),
            (audiohub_pair(h, "ok", "n", long, AUDIOHUB_CAP_ALL, nil, nil), AUDIOHUB_ERR_TEXT),
            (audiohub_placement(h, "ok", audiohub_placement(rawValue: 5), nil, nil), AUDIOHUB_ERR_INVAL),
        ]
        for (index, (got, expected)) in refusals.enumerated() {
            #expect(got == expected, "refusal \(index): \(String(cString: audiohub_strerror(got)))")
        }
        #expect(hub.stats.requests == 0 && hub.stats.publishes == 0 && hub.stats.queued == 0)
        // Nothing reached the broker either: the first telemetry a subscriber (there before the refusals) sees is the
        // one valid request made after them.
        let valid = String(repeating: "a", count: 64)
        #expect(audiohub_unpair(h, valid, nil, nil) == AUDIOHUB_ERR_SUCCESS)
        let seen = try await subscriber.output()
        #expect(seen == ["audio/hubs/sdk-refuse/accessories/\(valid)/telemetry"])

        var handle: OpaquePointer?
        #expect(audiohub_new("123456789abc", nil, &handle) == AUDIOHUB_ERR_HUB_ID, "a device's address")
        #expect(audiohub_new("hub/1", nil, &handle) == AUDIOHUB_ERR_HUB_ID && handle == nil)
        #expect(audiohub_connect(h, "tcp://x", nil, nil) == AUDIOHUB_ERR_URL)
        #expect(audiohub_connect(h, "mqtt://127.0.0.1:1883", nil, nil) == AUDIOHUB_ERR_STATE, "connected already")
        #expect(audiohub_int_option(h, AUDIOHUB_OPT_TIMEOUT_MS, 10) == AUDIOHUB_ERR_STATE, "settings before connecting")
    }

    @Test func urlsAreCheckedAndTLSNeedsACA() throws {
        var handle: OpaquePointer?
        #expect(audiohub_new("sdk-urls", nil, &handle) == AUDIOHUB_ERR_SUCCESS)
        defer { audiohub_destroy(handle) }
        for bad in ["", "mqtt://", "mqtt://:1883", "mqtt://host:0", "mqtt://host:65536", "mqtt://host:12x", "http://host",
                    "mqtt://[::1"] {
            #expect(audiohub_connect(handle, bad, nil, nil) == AUDIOHUB_ERR_URL, "\(bad)")
        }
        #expect(audiohub_connect(handle, "mqtts://localhost", nil, nil) == AUDIOHUB_ERR_TLS, "no CA")
        #expect(audiohub_tls_set(handle, "/nonexistent/ca.crt", "cert.pem", nil) == AUDIOHUB_ERR_INVAL, "cert without key")
        #expect(audiohub_topic_root_set(handle, "a/#") == AUDIOHUB_ERR_INVAL)
        #expect(audiohub_topic_root_set(handle, "/audio") == AUDIOHUB_ERR_INVAL)
        #expect(audiohub_topic_root_set(handle, "site-7/audio") == AUDIOHUB_ERR_SUCCESS)
        #expect(audiohub_connect(handle, "mqtt://[::1]:1883", nil, nil) == AUDIOHUB_ERR_SUCCESS)
    }

    /// The structs the SDK copies into the caller's memory only grow at their end, and each call says how much memory
    /// the caller has: a firmware built against an older header gets what it knows (nothing written beyond), and one
    /// built against a newer header gets zeros for the fields this library does not have.
    @Test func countersAndViewsFillTheSizeTheCallerHas() throws {
        var handle: OpaquePointer?
        #expect(audiohub_new("sdk-sizes", nil, &handle) == AUDIOHUB_ERR_SUCCESS)
        defer { audiohub_destroy(handle) }
        #expect(audiohub_placement(handle, "buds", AUDIOHUB_PLACEMENT_ON_HEAD, nil, nil) == AUDIOHUB_ERR_SUCCESS)
        // Each with the size of its first sized version (0.2: each then ended with `queued`; the *_MIN_SIZE macros).
        let calls: [(size: Int, minimum: Int, call: (UnsafeMutableRawPointer, Int) -> audiohub_err)] = [
            (MemoryLayout<audiohub_stats>.size, MemoryLayout<audiohub_stats>.offset(of: \.queued)! + 8, { out, size in
                audiohub_stats_get(handle, out.assumingMemoryBound(to: audiohub_stats.self), size)
            }),
            (MemoryLayout<audiohub_accessory>.size,
             MemoryLayout<audiohub_accessory>.offset(of: \.queued)! + MemoryLayout<Int>.size, { out, size in
                audiohub_accessory_get(handle, "buds", out.assumingMemoryBound(to: audiohub_accessory.self), size)
            }),
        ]
        for (size, minimum, call) in calls {
            // A newer caller's struct, 32 bytes longer: the library's fields, then zeros.
            let newer = UnsafeMutableRawBufferPointer.allocate(byteCount: size + 32, alignment: 8)
            defer { newer.deallocate() }
            newer.initializeMemory(as: UInt8.self, repeating: 0xAB)
            #expect(call(newer.baseAddress!, size + 32) == AUDIOHUB_ERR_SUCCESS)
            #expect(newer[size...].allSatisfy { $0 == 0 }, "the fields this library does not have are zeroed")
            #expect(newer[..<size].contains { $0 != 0xAB }, "the library's fields are written")
            // An exact fit, and less than any version's struct.
            let exact = UnsafeMutableRawBufferPointer.allocate(byteCount: size + 8, alignment: 8)
            defer { exact.deallocate() }
            exact.initializeMemory(as: UInt8.self, repeating: 0xAB)
            #expect(call(exact.baseAddress!, size) == AUDIOHUB_ERR_SUCCESS)
            #expect(exact[size...].allSatisfy { $0 == 0xAB }, "nothing is written beyond the caller's size")
            // An older caller's struct (the fields 0.3 added are beyond it): what it knows, nothing beyond.
            exact.initializeMemory(as: UInt8.self, repeating: 0xAB)
            #expect(call(exact.baseAddress!, minimum) == AUDIOHUB_ERR_SUCCESS)
            #expect(exact[minimum...].allSatisfy { $0 == 0xAB }, "nothing is written beyond an older caller's size")
            #expect(call(exact.baseAddress!, minimum - 1) == AUDIOHUB_ERR_INVAL, "smaller than the first sized version")
        }
        var stats = audiohub_stats()
        #expect(audiohub_stats_get(handle, &stats, MemoryLayout<audiohub_stats>.size) == AUDIOHUB_ERR_SUCCESS)
        #expect(stats.requests == 1 && stats.queued == 1)
    }

    @Test func connectsOverTLSWithTheCAAndNotWithAStrangersCA() async throws {
        let certificates = try await TestCertificates.make()
        let stranger = try await TestCertificates.make()
        let broker = try await MosquittoBroker(extraConfig: TestCertificates.listener(certificates))
        let url = "mqtts://localhost:\(broker.port)"
        let trusted = try TestHub("sdk-tls", broker: broker, url: url) {
            _ = audiohub_tls_set($0, certificates.path + "/ca.crt", nil, nil)
        }
        try await trusted.waitUntilConnected()
        let tls = ["-h", "localhost", "--cafile", certificates.path + "/ca.crt"]
        #expect(try await hubStatus(broker, "audio/hubs/sdk-tls/status", arguments: tls).online)
        let untrusted = try TestHub("sdk-tls-stranger", broker: broker, url: url) {
            _ = audiohub_tls_set($0, stranger.path + "/ca.crt", nil, nil)
        }
        try await waitUntil("the stranger's TLS failure") { audiohub_last_mosquitto_error(untrusted.handle, nil) != 0 }
        #expect(!audiohub_is_connected(untrusted.handle))
        #expect(untrusted.recorder.connects.withLock { $0 }.isEmpty, "never connected")
    }
}

// MARK: - Reading retained messages


/// The retained message on `topic`, read with `mosquitto_sub -C 1 -W 2 -N` (raw bytes); `arguments` go before the
/// others (`-h localhost --cafile ca.crt` for TLS).
func retainedPayload(_ broker: MosquittoBroker, _ topic: String, arguments: [String] = []) async throws -> [UInt8] {
    let tool = try MosquittoBroker.findTool("mosquitto_sub", package: "mosquitto-clients")
    let output = broker.directory.appendingPathComponent("retained-\(UUID().uuidString).bin")
    defer { try? FileManager.default.removeItem(at: output) }
    // sh -c 'out=$1; shift; exec tool "$@" > out': the payload goes to a file, byte for byte.
    let process = try ChildProcess(
        executable: "/bin/sh",
        arguments: ["-c", "out=\"$1\"; shift; exec \"$0\" \"$@\" > \"$out\"", tool, output.path, "-h", "127.0.0.1"]
            + arguments + ["-p", "\(broker.port)", "-V", "mqttv5", "-t", topic, "-C", "1", "-W", "2", "-N", "--retained-only"],
        outputPath: "/dev/null")
    guard try await process.exit(timeout: .seconds(5)) == 0 else {
        throw TestFailure("no retained message on \(topic)")
    }
    return [UInt8](try Data(contentsOf: output))
}

/// The retained state of `accessory`, read with mosquitto_sub.
func retainedState(_ broker: MosquittoBroker, _ accessory: String) async throws -> Audioaccessory_V1_AccessoryState {
    try Audioaccessory_V1_AccessoryState(
        serializedBytes: await retainedPayload(broker, "audio/accessories/\(accessory)/state"))
}

func hubStatus(
    _ broker: MosquittoBroker, _ topic: String, arguments: [String] = []
) async throws -> Audioaccessory_V1_HubStatus {
    try Audioaccessory_V1_HubStatus(serializedBytes: await retainedPayload(broker, topic, arguments: arguments))
}

