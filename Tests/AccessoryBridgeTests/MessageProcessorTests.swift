@testable import AccessoryBridge
import AccessoryModel
@testable import AccessoryWire
import Foundation
import Logging
import MQTTClient
import MetricsTestKit
import Synchronization
import TestSupport
import Testing

/// The bridge's message handling without a broker: what each inbound message makes it publish.
/// (BridgeIntegrationTests drive the same paths through a real mosquitto.)
@Suite struct MessageProcessorTests {
    final class Recorder: MessagePublisher {
        private let messages = Mutex<[MQTTMessage]>([])
        /// While set, every publish fails as MQTTClient's does when disconnected beyond its queue's bound.
        let refusing = Mutex(false)
        /// Publishes on these topics fail the same way.
        let refusedTopics = Mutex<Set<String>>([])
        /// What the processor reads beyond its own filters (a cluster's slot: the playing devices its accessories list).
        let subscriptions = Mutex<Set<String>>([])

        func subscribe(_ filter: String) throws(MQTTError) {
            subscriptions.withLock { _ = $0.insert(filter) }
        }

        func unsubscribe(_ filter: String) throws(MQTTError) {
            subscriptions.withLock { _ = $0.remove(filter) }
        }

        func send(_ message: MQTTMessage) throws(MQTTError) {
            if refusing.withLock({ $0 }) || refusedTopics.withLock({ $0.contains(message.topic) }) {
                throw MQTTError(kind: .queueFull, code: 4, message: "disconnected, and the queue is full")
            }
            messages.withLock { $0.append(message) }
        }

        /// Everything published since the last call.
        func take() -> [MQTTMessage] {
            messages.withLock { messages in
                defer { messages = [] }
                return messages
            }
        }
    }

    final class TestClock: Sendable {
        let time = Mutex(Timestamp(unixMilliseconds: 1_763_790_000_000))
        var wallClock: WallClock { WallClock { self.time.withLock { $0 } } }
        func advance(_ duration: Duration) { time.withLock { $0 = $0 + duration } }
    }

    let recorder = Recorder()
    let clock = TestClock()
    let metrics = TestMetrics()
    let logs = LogRecorder()
    let processor: MessageProcessor
    let codec = WireCodec()
    static let phone = BluetoothAddress("12:34:56:78:9A:BC")!

    init() {
        var configuration = BridgeConfiguration(mqtt: MQTTConfiguration(clientID: "test"))
        configuration.policy.accessory.diagnosticsGracePeriod = .seconds(30)
        // The contract's messages only: what home automation reads is HomeAutomationTests' subject.
        configuration.homeAutomation = false
        // Deadlines only: the periodic refresh of the gauges is the operations tests' subject.
        configuration.statisticsInterval = nil
        processor = MessageProcessor(
            configuration: configuration, instanceID: "t", publisher: recorder, clock: clock.wallClock,
            logger: Logger(label: "test") { [logs] _ in logs }, metrics: metrics)
    }

    // MARK: - Helpers

    func telemetry(
        _ request: AccessoryRequest, sequence: UInt64 = 0, requestID: String = "r", hub: String = "hub-1",
        accessory: String = "headphones", format: PayloadFormat = .protobuf, properties: MQTTProperties = .none
    ) {
        let message = Audioaccessory_V1_AccessoryTelemetry(request, sequence: sequence, requestID: requestID)
        send("audio/hubs/\(hub)/accessories/\(accessory)/telemetry", codec.encode(message, as: format), properties)
    }

    func send(_ topic: String, _ payload: [UInt8], _ properties: MQTTProperties = .none) {
        processor.handle(MQTTMessage(topic: topic, payload: payload, properties: properties))
    }

    func source(_ activity: Activity) {
        let state = Audioaccessory_V1_SourceState(SourceReport(activity: activity))
        send("audio/sources/\(Self.phone.topicID)/state", codec.encode(state, as: .protobuf))
    }

    /// Pairs, registers and connects the headphones to the phone.
    /// Headphones that switch and report placement (no head tracking: see HeadTrackingProcessorTests).
    func setUpHeadphones() {
        telemetry(.paired(name: "Studio", model: "S", hardwareCapabilities: .all), sequence: 1)
        telemetry(.register([.audioSwitching, .placement]), sequence: 2)
        telemetry(.sources(primary: Self.phone.data, secondary: nil), sequence: 3)
        _ = recorder.take()
    }

    func results(_ messages: [MQTTMessage]) throws -> [Audioaccessory_V1_RequestResult] {
        try messages.filter { $0.topic.hasSuffix("/result") }.map {
            try codec.decode(Audioaccessory_V1_RequestResult.self, from: $0.payload, format: format(of: $0))
        }
    }

    func commands(_ messages: [MQTTMessage]) throws -> [(String, Audioaccessory_V1_SwitchCommand)] {
        try messages.filter { $0.topic.hasSuffix("/commands") }.map {
            ($0.topic, try codec.decode(Audioaccessory_V1_SwitchCommand.self, from: $0.payload, format: .protobuf))
        }
    }

    func states(_ messages: [MQTTMessage]) throws -> [Audioaccessory_V1_AccessoryState] {
        try messages.filter { $0.topic.hasPrefix("audio/accessories/") }.map {
            #expect($0.retain)
            return try codec.decode(Audioaccessory_V1_AccessoryState.self, from: $0.payload, format: format(of: $0))
        }
    }

    func format(of message: MQTTMessage) -> PayloadFormat {
        message.properties.contentType == "application/json" ? .json : .protobuf
    }

    // MARK: - The tour

    @Test func putOnRoutesTakeOffPausesPutBackResumes() throws {
        setUpHeadphones()
        source(.media)
        #expect(try commands(recorder.take()).isEmpty, "not worn yet")

        telemetry(.placement(.onHead), sequence: 4)
        var published = recorder.take()
        let route = try commands(published)
        #expect(route.map(\.0) == ["audio/sources/123456789abc/commands"])
        #expect(route.map(\.1.action) == [.routeToAccessory])
        #expect(route.map(\.1.reason) == [.putOn])
        #expect(route.first?.1.accessoryID == "headphones")
        #expect(try states(published).last?.routedSource == Self.phone.data)
        #expect(try results(published).map(\.error) == [.none])
        #expect(try results(published).first?.state.lastSequence == 4)

        telemetry(.placement(.offHead), sequence: 5)
        published = recorder.take()
        #expect(try commands(published).map(\.1.action) == [.pause])
        #expect(try states(published).last?.routedSource.isEmpty == true)

        clock.advance(.seconds(5))
        telemetry(.placement(.inEar), sequence: 6)
        published = recorder.take()
        #expect(try commands(published).map(\.1.action) == [.routeToAccessory, .resume])
        // Sequences start above the bridge's start in ms × 1000, so that they keep increasing across restarts.
        let base: UInt64 = 1_763_790_000_000 * 1000
        #expect(try commands(published).map(\.1.sequence) == [base + 3, base + 4])
        #expect(try metrics.expectCounter("accessory_bridge_commands_total", [("action", "RESUME")]).totalValue == 1)
    }

    @Test func everyTelemetryGetsAResultOnTheHubsTopic() throws {
        telemetry(.paired(name: "Studio", model: "S", hardwareCapabilities: .audioSwitching), sequence: 1, requestID: "p")
        var published = recorder.take()
        #expect(published.map(\.topic) == [
            "audio/accessories/headphones/state", "audio/hubs/hub-1/accessories/headphones/result",
        ])
        #expect(published.allSatisfy { $0.qos == .atLeastOnce && $0.properties.contentType == "application/protobuf" })
        #expect(published.last?.retain == false)

        telemetry(.register(.all), sequence: 2, requestID: "reg")
        published = recorder.take()
        let result = try #require(try results(published).first)
        #expect(result.requestID == "reg")
        #expect(result.sequence == 2)
        #expect(result.error == .accessoryNotCapable)
        #expect(result.message.contains("cannot register [.placement, .audioSpatialization, .headTracking]"))
        #expect(result.state.registration == .paired, "the state is current(for:), unchanged")
        // A failure consumes its sequence: the state is published with it and the outcome, so that a retry after a
        // restart still gets this answer.
        let state = try #require(try states(published).first)
        #expect(state.registration == .paired && state.lastSequence == 2)
        #expect(state.lastError == .accessoryNotCapable && state.lastErrorMessage == result.message)
        #expect(try metrics.expectCounter("accessory_bridge_results_total", [("error", "accessoryNotCapable")]).totalValue == 1)
    }

    @Test func jsonInJsonOut() throws {
        telemetry(.paired(name: "Studio", model: "S", hardwareCapabilities: .all), format: .json)
        let published = recorder.take()
        #expect(published.allSatisfy { $0.properties.contentType == "application/json" })
        #expect(try results(published).first?.error == Audioaccessory_V1_ErrorCode.none)
        #expect(try states(published).first?.name == "Studio")
        let text = String(decoding: published[1].payload, as: UTF8.self)
        #expect(text.contains(#""error":"ERROR_CODE_NONE""#), "\(text)")
    }

    @Test func resultsAlsoGoToTheResponseTopicWithTheCorrelationData() throws {
        let properties = MQTTProperties(responseTopic: "audio/hubs/hub-1/responses/client-7", correlationData: [1, 2, 3])
        telemetry(.register(.all), requestID: "x", properties: properties)
        let published = recorder.take()
        #expect(published.map(\.topic) == ["audio/hubs/hub-1/accessories/headphones/result", "audio/hubs/hub-1/responses/client-7"])
        #expect(published[1].properties.correlationData == [1, 2, 3])
        #expect(published[0].payload == published[1].payload)
        let result = try codec.decode(Audioaccessory_V1_RequestResult.self, from: published[1].payload, format: .protobuf)
        #expect(result.error == .invalidRequest)
        #expect(result.message.contains("is not paired"))
        #expect(!result.hasState, "an unknown accessory has no state")
    }

    @Test func responseTopicsOutsideTheHubsOwnAreRefused() throws {
        for topic in ["audio/sources/123456789abc/commands", "audio/hubs/hub-2/responses/x", "audio/hubs/hub-1/responses/",
            "audio/hubs/hub-1/responses/+", "replies/me"]
        {
            telemetry(.register(.all), properties: MQTTProperties(responseTopic: topic, correlationData: [1]))
            #expect(recorder.take().map(\.topic) == ["audio/hubs/hub-1/accessories/headphones/result"], "\(topic)")
        }
        #expect(try metrics.expectCounter("accessory_bridge_response_topics_refused_total").totalValue == 5)
    }

    // MARK: - Bad input

    @Test func undecodablePayloadsGetAnInvalidRequestResult() throws {
        send("audio/hubs/hub-1/accessories/headphones/telemetry", [0x08])
        let published = recorder.take()
        let result = try #require(try results(published).first)
        #expect(result.error == .invalidRequest)
        #expect(result.message.contains("truncated"))
        #expect(try metrics.expectCounter("accessory_bridge_messages_refused_total", [("reason", "protobuf")]).totalValue == 1)
    }

    @Test func anUnsupportedContentTypeIsRefusedWithAResult() throws {
        send("audio/hubs/hub-1/accessories/headphones/telemetry", Array("{}".utf8),
            MQTTProperties(contentType: "text/plain"))
        let result = try #require(try results(recorder.take()).first)
        #expect(result.message.contains("content type 'text/plain'"))
    }

    @Test func topicsOutsideTheContractAreCountedAndIgnored() throws {
        send("audio/hubs/hub 1/accessories/x/telemetry", [])
        send("audio/sources/XYZ/state", [])
        #expect(recorder.take().isEmpty)
        #expect(try metrics.expectCounter("accessory_bridge_messages_refused_total", [("reason", "topic")]).totalValue == 2)
    }

    @Test func requestsAboutUnknownAccessoriesLeaveNoState() throws {
        for index in 0..<50 {
            telemetry(.placement(.onHead), accessory: "ghost-\(index)")
        }
        let published = recorder.take()
        #expect(published.count == 50)
        #expect(try results(published).allSatisfy { $0.error == .invalidRequest && !$0.hasState })
        telemetry(.paired(name: String(repeating: "n", count: 300), model: "", hardwareCapabilities: .all),
            accessory: "ghost-0")
        let failedPairing = try #require(try results(recorder.take()).first)
        #expect(failedPairing.error == .invalidRequest)
        #expect(!failedPairing.hasState, "a failed pairing creates nothing")
        telemetry(.register(.all), accessory: "ghost-0")
        #expect(try results(recorder.take()).first?.message.contains("is not paired") == true)
    }

    // MARK: - Sequences (after Sparkplug B)

    @Test func aDuplicateChangesNothingAndGetsItsFirstResultAgain() throws {
        setUpHeadphones()
        source(.media)
        telemetry(.placement(.onHead), sequence: 4, requestID: "first")
        let first = recorder.take()
        let firstResult = try #require(first.first { $0.topic.hasSuffix("/result") })
        #expect(try commands(first).count == 1)

        telemetry(.placement(.onHead), sequence: 4, requestID: "again",
            properties: MQTTProperties(responseTopic: "audio/hubs/hub-1/responses/x", correlationData: [7]))
        let again = recorder.take()
        #expect(again.map(\.topic) == ["audio/hubs/hub-1/accessories/headphones/result", "audio/hubs/hub-1/responses/x"])
        #expect(again[1].properties.correlationData == [7])
        #expect(try commands(again).isEmpty && (try states(again)).isEmpty)
        #expect(try metrics.expectCounter("accessory_bridge_duplicates_total").totalValue == 1)
        // Its original outcome, marked as a repeat, with this message's request id and the current state.
        let repeated = try #require(try results(again).first)
        var original = try codec.decode(Audioaccessory_V1_RequestResult.self, from: firstResult.payload, format: .protobuf)
        original.requestID = "again"
        original.duplicate = true
        #expect(repeated == original)

        // A message that arrives after a later one (out of order: 6 after 9) repeats a sequence processed before;
        // its outcome is no longer kept, and the answer says so.
        telemetry(.placement(.inEar), sequence: 9)
        _ = recorder.take()
        telemetry(.placement(.offHead), sequence: 6)
        let late = try #require(try results(recorder.take()).first)
        #expect(late.duplicate)
        #expect(late.error == .unspecified)
        #expect(late.message.contains("sequence 6 was processed before (the last one processed is 9)"))
        #expect(late.state.configuration.devicePlacement == .inEar, "nothing changed")
    }

    @Test func aFailureConsumesItsSequence() throws {
        setUpHeadphones()
        telemetry(.register([.placement]), sequence: 4)  // fine
        telemetry(.update(Configuration(deviceCapabilities: .all)), sequence: 5)  // fails: other capabilities
        _ = recorder.take()
        telemetry(.placement(.onHead), sequence: 6)
        let published = recorder.take()
        #expect(!published.contains { $0.topic.hasSuffix("/rebirth") }, "5 was processed: no gap")
        #expect(try metrics.expectCounter("accessory_bridge_rebirth_requests_total").totalValue == 0)
    }

    @Test func aGapIsAppliedCountedAndAsksTheHubForEverythingAgain() throws {
        setUpHeadphones()
        telemetry(.placement(.onHead), sequence: 7)
        let published = recorder.take()
        #expect(try results(published).first?.error == Audioaccessory_V1_ErrorCode.none, "applied")
        let rebirth = try #require(published.first { $0.topic == "audio/hubs/hub-1/rebirth" })
        let request = try codec.decode(Audioaccessory_V1_RebirthRequest.self, from: rebirth.payload, format: .protobuf)
        #expect(request.accessoryID == "headphones")
        #expect(request.lastSequence == 3)
        #expect(request.receivedSequence == 7)
        #expect(request.reason.contains("3 messages missing"))

        // Another gap soon after: the hub is not asked twice within the interval.
        telemetry(.placement(.offHead), sequence: 9)
        #expect(!recorder.take().contains { $0.topic.hasSuffix("/rebirth") })
        clock.advance(.seconds(11))
        telemetry(.placement(.onHead), sequence: 11)
        #expect(recorder.take().contains { $0.topic.hasSuffix("/rebirth") })
        #expect(try metrics.expectCounter("accessory_bridge_rebirth_requests_total").totalValue == 2)
    }

    @Test func aPairingIsABirthThatRestartsTheCount() throws {
        setUpHeadphones()
        telemetry(.placement(.onHead), sequence: 40)
        _ = recorder.take()
        // The hub restarted and lost its counter: it pairs again from 1.
        telemetry(.paired(name: "Studio", model: "S", hardwareCapabilities: .all), sequence: 1)
        #expect(try results(recorder.take()).first?.error == Audioaccessory_V1_ErrorCode.none)
        telemetry(.register(.all), sequence: 2)
        let registered = try #require(try results(recorder.take()).first)
        #expect(registered.error == Audioaccessory_V1_ErrorCode.none)
        #expect(registered.state.lastSequence == 2)
    }

    @Test func theLargestSequenceDoesNotStopTheBridge() throws {
        // Found by the fuzzer (Fuzz/crashes/sequence-overflow-*): `last + 1` trapped at 2⁶⁴ − 1.
        telemetry(.paired(name: "Studio", model: "S", hardwareCapabilities: .all), sequence: .max)
        telemetry(.unpaired, sequence: 1)
        let results = try results(recorder.take())
        #expect(results.map(\.error) == [.none, .unspecified])
        #expect(results.last?.duplicate == true)
        #expect(results.last?.message.contains("the last one processed is 18446744073709551615") == true)
        telemetry(.paired(name: "Studio", model: "S", hardwareCapabilities: .all), sequence: 1)
        #expect(try self.results(recorder.take()).first?.error == Audioaccessory_V1_ErrorCode.none, "a birth starts over")
    }

    // MARK: - Restoring after a restart

    @Test func restoringRebuildsWithoutPublishingAndRoutingContinues() throws {
        setUpHeadphones()
        source(.media)
        telemetry(.placement(.onHead), sequence: 4)
        let published = recorder.take()
        let retainedState = try #require(published.last { $0.topic == "audio/accessories/headphones/state" })
        let retainedSource = MQTTMessage(
            topic: "audio/sources/123456789abc/state",
            payload: codec.encode(Audioaccessory_V1_SourceState(SourceReport(sequence: 1, activity: .media)), as: .protobuf))

        // A new bridge process.
        let restarted = MessageProcessor(
            configuration: BridgeConfiguration(mqtt: MQTTConfiguration(clientID: "test")), instanceID: "t2",
            publisher: recorder, clock: clock.wallClock, logger: Logger(label: "test"), metrics: metrics)
        let garbage = MQTTMessage(topic: "audio/accessories/ghost/state", payload: [0xFF, 0xFF])
        // The state twice, as a reader that reconnected reads it again: one accessory.
        for message in [retainedSource, retainedState, garbage, retainedState] { restarted.restore(message) }
        let counts = restarted.restoringFinished()
        #expect(counts.accessories == 1 && counts.sources == 1 && counts.skipped == 1)
        #expect(recorder.take().isEmpty, "restoring publishes nothing")

        // The sequence continues where it was; a redelivered message is a duplicate.
        restarted.handle(MQTTMessage(
            topic: "audio/hubs/hub-1/accessories/headphones/telemetry",
            payload: codec.encode(Audioaccessory_V1_AccessoryTelemetry(.placement(.onHead), sequence: 4), as: .protobuf)))
        let repeated = try #require(try results(recorder.take()).first)
        #expect(repeated.duplicate && repeated.error == Audioaccessory_V1_ErrorCode.none, "its original outcome")

        // Routing continues: the route was restored, so taking them off pauses the phone.
        restarted.handle(MQTTMessage(
            topic: "audio/hubs/hub-1/accessories/headphones/telemetry",
            payload: codec.encode(Audioaccessory_V1_AccessoryTelemetry(.placement(.offHead), sequence: 5), as: .protobuf)))
        let after = recorder.take()
        #expect(try commands(after).map(\.1.action) == [.pause])
        #expect(try results(after).first?.state.lastSequence == 5)
    }

    // MARK: - Hubs, sources, time

    @Test func anOfflineHubReleasesAndMarksItsAccessoriesStale() throws {
        setUpHeadphones()
        source(.media)
        telemetry(.placement(.onHead))
        _ = recorder.take()
        // The will of a hub whose time is unknown is an all-default HubStatus: an empty payload.
        let offline = Audioaccessory_V1_HubStatus.with { $0.online = false }
        #expect(codec.encode(offline, as: .protobuf).isEmpty)
        send("audio/hubs/hub-1/status", codec.encode(offline, as: .protobuf))
        #expect(recorder.take().allSatisfy { !$0.topic.hasPrefix("audio/accessories/headphones") }, "within the grace")
        clock.advance(.seconds(10))
        processor.tick()
        let published = recorder.take()
        #expect(try commands(published).map(\.1.action) == [.release])
        #expect(try commands(published).map(\.1.reason) == [.accessoryIneligible])
        let state = try #require(try states(published).last)
        #expect(state.stale)
        #expect(state.diagnostics.first?.contains("hub hub-1 is offline") == true)

        let online = Audioaccessory_V1_HubStatus.with {
            $0.online = true
            $0.sinceUnixMs = 1_763_790_001_000
        }
        send("audio/hubs/hub-1/status", codec.encode(online, as: .json), MQTTProperties(contentType: "application/json"))
        let back = recorder.take()
        #expect(try states(back).last?.stale == false)
        #expect(try commands(back).map(\.1.action) == [.routeToAccessory], "worn again: put on")
    }

    @Test func diagnosticsComeDueOnTheClock() throws {
        telemetry(.paired(name: "Studio", model: "S", hardwareCapabilities: .all))
        telemetry(.register(.all))
        _ = recorder.take()
        #expect(processor.timeUntilWake() == .seconds(30))
        clock.advance(.seconds(29))
        processor.tick()
        #expect(recorder.take().isEmpty)
        clock.advance(.seconds(1))
        processor.tick()
        let state = try #require(try states(recorder.take()).last)
        #expect(state.diagnostics.count == 2)
        #expect(processor.timeUntilWake() == nil)
    }

    @Test func whatCouldNotBePublishedGoesOutOnReconnection() throws {
        setUpHeadphones()
        source(.media)
        _ = recorder.take()
        recorder.refusing.withLock { $0 = true }
        telemetry(.placement(.onHead), sequence: 4)
        #expect(try metrics.expectCounter("accessory_bridge_publish_failures_total").totalValue == 3)
        recorder.refusing.withLock { $0 = false }
        processor.event(.connected(sessionPresent: true))
        let published = recorder.take()
        // The route, which the device never got (the engine no longer counts it as in force), and the state.
        #expect(try commands(published).map(\.1.action) == [.routeToAccessory])
        #expect(try commands(published).map(\.1.reason) == [.putOn])
        #expect(try states(published).map(\.routedSource) == [Self.phone.data])
        #expect(try results(published).isEmpty, "an answer is not kept: the hub retries")
        // The hub's retry gets its original outcome.
        telemetry(.placement(.onHead), sequence: 4)
        let retry = try #require(try results(recorder.take()).first)
        #expect(retry.duplicate && retry.error == Audioaccessory_V1_ErrorCode.none)
    }

    @Test func aFullQueueIsLoggedOnceWhenItStartsAndOnceWhenItDrains() throws {
        setUpHeadphones()
        recorder.refusing.withLock { $0 = true }
        for sequence in UInt64(4)...13 {
            telemetry(.placement(sequence.isMultiple(of: 2) ? .onHead : .offHead), sequence: sequence)
        }
        // A state and an answer for each of ten reports, all refused: counted each, logged once.
        #expect(try metrics.expectCounter("accessory_bridge_publish_failures_total").totalValue == 20)
        var warnings = logs.all.filter { $0.hasPrefix("warning") }
        #expect(warnings.count == 1)
        #expect(warnings.first?.contains("the outbound queue is full") == true)
        #expect(warnings.first?.contains("mqtt.topic=audio/accessories/headphones/state") == true)
        #expect(!logs.all.contains { $0.contains("publish failed") })

        recorder.refusing.withLock { $0 = false }
        processor.event(.queueDrained)
        warnings = logs.all.filter { $0.hasPrefix("warning") }
        #expect(warnings.count == 2)
        #expect(warnings.last?.hasPrefix("warning the outbound queue has room again") == true)
        #expect(warnings.last?.contains("refused=20") == true)
        // The latest state went out once the queue drained.
        #expect(try states(recorder.take()).map(\.lastSequence) == [13])

        // The next overflow is logged again, with its own count.
        recorder.refusing.withLock { $0 = true }
        telemetry(.placement(.onHead), sequence: 14)
        recorder.refusing.withLock { $0 = false }
        processor.event(.queueDrained)
        warnings = logs.all.filter { $0.hasPrefix("warning") }
        #expect(warnings.count == 4)
        #expect(warnings.last?.contains("refused=2") == true)
    }

    @Test func aSourceBecomingActiveIsRoutedAndTheStateRepublished() throws {
        setUpHeadphones()
        telemetry(.placement(.onHead))
        _ = recorder.take()
        source(.media)
        let published = recorder.take()
        #expect(try commands(published).map(\.1.reason) == [.sourceActivated])
        #expect(try states(published).map(\.routedSource) == [Self.phone.data])
    }

    // MARK: - Metrics

    @Test func theGaugesShowTheBridgesStateAndTheHistogramsEachMessage() throws {
        setUpHeadphones()
        source(.media)
        telemetry(.placement(.inEar), sequence: 4)
        send("audio/hubs/hub-1/status", codec.encode(HubStatus(online: true, since: Timestamp(unixMilliseconds: 0)), as: .protobuf))
        processor.housekeeping()
        #expect(try metrics.expectMeter("accessory_bridge_accessories", [("registration", "registered")]).lastValue == 1)
        // Nothing paired: its share never moved from 0.
        #expect((try metrics.expectMeter("accessory_bridge_accessories", [("registration", "paired")]).lastValue ?? 0) == 0)
        #expect(try metrics.expectMeter("accessory_bridge_accessories_worn").lastValue == 1)
        #expect(try metrics.expectMeter("accessory_bridge_accessories_routed").lastValue == 1)
        #expect(try metrics.expectMeter("accessory_bridge_sources", [("activity", "media")]).lastValue == 1)
        #expect(try metrics.expectMeter("accessory_bridge_hubs_online").lastValue == 1)
        // Three setup messages, the source report, the placement, the hub status: each handled once.
        #expect(try metrics.expectTimer("accessory_bridge_message_handling_seconds").values.count == 6)
        // One command (the route), from the placement that caused it.
        #expect(try metrics.expectTimer("accessory_bridge_message_to_command_seconds").values.count == 1)

        telemetry(.placement(.offHead), sequence: 5)
        send("audio/hubs/hub-1/status", [])
        processor.housekeeping()
        #expect(try metrics.expectMeter("accessory_bridge_accessories_worn").lastValue == 0)
        #expect(try metrics.expectMeter("accessory_bridge_accessories_routed").lastValue == 0)
        #expect(try metrics.expectMeter("accessory_bridge_hubs_online").lastValue == 0)
        #expect(try metrics.expectTimer("accessory_bridge_message_to_command_seconds").values.count == 2, "the pause")
    }

    @Test func connectionsAreCounted() throws {
        processor.event(.connected(sessionPresent: false))
        #expect(try metrics.expectMeter("accessory_bridge_broker_connected").lastValue == 1)
        processor.event(.disconnected(MQTTError(kind: .disconnected, code: 7, message: "gone")))
        #expect(try metrics.expectMeter("accessory_bridge_broker_connected").lastValue == 0)
        #expect(try metrics.expectCounter("accessory_bridge_broker_reconnects_total").totalValue == 0)
        processor.event(.connected(sessionPresent: true))
        #expect(try metrics.expectCounter("accessory_bridge_broker_reconnects_total").totalValue == 1)
    }
}
