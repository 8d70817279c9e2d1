@testable import AccessoryBridge
import AccessoryModel
@testable import AccessoryWire
import Logging
import MQTTClient
import MetricsTestKit
import Testing

/// Rule 13 through the processor, without a broker: each session's news goes to the hub's and the host's topics,
/// news the queue refused is owed until publishing resumes, and a single bridge's graceful shutdown ends its sessions.
@Suite struct HeadTrackingProcessorTests {
    typealias Recorder = MessageProcessorTests.Recorder
    let recorder = Recorder()
    let clock = MessageProcessorTests.TestClock()
    let processor: MessageProcessor
    let codec = WireCodec()
    static let phone = MessageProcessorTests.phone
    static let hubTopic = "audio/hubs/hub-1/accessories/headphones/headtracking"
    static let hostTopic = "audio/sources/123456789abc/headtracking"

    init() {
        var configuration = BridgeConfiguration(mqtt: MQTTConfiguration(clientID: "test"))
        configuration.homeAutomation = false
        configuration.statisticsInterval = nil
        processor = MessageProcessor(
            configuration: configuration, instanceID: "t", publisher: recorder, clock: clock.wallClock,
            logger: Logger(label: "test"), metrics: TestMetrics())
    }

    func telemetry(_ request: AccessoryRequest, sequence: UInt64) {
        let message = Audioaccessory_V1_AccessoryTelemetry(request, sequence: sequence, requestID: "r\(sequence)")
        processor.handle(
            MQTTMessage(topic: "audio/hubs/hub-1/accessories/headphones/telemetry", payload: codec.encode(message, as: .protobuf)))
    }

    func news(_ messages: [MQTTMessage]) throws -> [(String, HeadTrackingEvent)] {
        try messages.filter { $0.topic.hasSuffix("/headtracking") }.map {
            ($0.topic, try codec.decode(HeadTrackingEvent.self, from: $0.payload, format: .protobuf).event)
        }
    }

    /// Head-tracking headphones on the phone, which plays media with head tracking on; then put on.
    func streaming() throws {
        telemetry(.paired(name: "Studio", model: "S", hardwareCapabilities: .all), sequence: 1)
        telemetry(.register(.all), sequence: 2)
        telemetry(.sources(primary: Self.phone.data, secondary: nil), sequence: 3)
        let state = Audioaccessory_V1_SourceState(SourceReport(activity: .media, headTracking: true))
        processor.handle(MQTTMessage(topic: "audio/sources/123456789abc/state", payload: codec.encode(state, as: .protobuf)))
        _ = recorder.take()
        telemetry(.placement(.onHead), sequence: 4)
    }

    @Test func eachNewsGoesToTheHubAndTheHostAndTheStateShowsTheSession() throws {
        try streaming()
        let published = recorder.take()
        let news = try news(published)
        #expect(news.map(\.0) == [Self.hostTopic, Self.hubTopic], "the host hears first")
        #expect(news.allSatisfy { $0.1.kind == .activated && $0.1.session.host == Self.phone })
        #expect(published.filter { $0.topic.hasSuffix("/headtracking") }.allSatisfy { !$0.retain && $0.qos == .atLeastOnce })
        let state = try #require(published.last { $0.topic == "audio/accessories/headphones/state" })
        let decoded = try codec.decode(AccessoryState.self, from: state.payload, format: .protobuf, at: clock.wallClock.now)
        #expect(decoded.headTracking?.id == news[0].1.session.id, "the retained state names the session in force")
    }

    @Test func newsTheQueueRefusedIsOwedUntilPublishingResumes() throws {
        recorder.refusedTopics.withLock { $0 = [Self.hubTopic] }
        try streaming()
        #expect(try news(recorder.take()).map(\.0) == [Self.hostTopic], "the hub's copy was refused")
        recorder.refusedTopics.withLock { $0 = [] }
        processor.event(.queueDrained)
        let again = try news(recorder.take())
        #expect(again.map(\.1.kind) == [.activated, .activated], "sent again, both copies: the host drops the repeat")
        processor.event(.queueDrained)
        #expect(try news(recorder.take()).isEmpty, "owed once")
    }

    @Test func aSingleBridgesShutdownEndsItsSessions() async throws {
        try streaming()
        _ = recorder.take()
        processor.shutdown.request(waking: { processor.wake() })
        await processor.shutdown.wait(timeout: .seconds(1))
        let news = try news(recorder.take())
        #expect(news.map(\.1.kind) == [.invalidated, .invalidated])
        #expect(news.allSatisfy { $0.1.reason == .shutdown })
    }
}
