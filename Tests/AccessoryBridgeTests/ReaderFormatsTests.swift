@testable import AccessoryBridge
import AccessoryModel
@testable import AccessoryWire
import Logging
import MQTTClient
import MetricsTestKit
import Testing

/// What the bridge sends a hub or a playing device is in the format that party last spoke; a party not heard from
/// gets the bridge's default (`--payload-format`). A bridge run in JSON for the people reading by hand still serves
/// the C SDK's hubs, which read protobuf.
@Suite struct ReaderFormatsTests {
    typealias Recorder = MessageProcessorTests.Recorder
    let recorder = Recorder()
    let clock = MessageProcessorTests.TestClock()
    let codec = WireCodec()
    static let phone = MessageProcessorTests.phone

    func processor(default format: PayloadFormat) -> MessageProcessor {
        var configuration = BridgeConfiguration(mqtt: MQTTConfiguration(clientID: "test"))
        configuration.payloadFormat = format
        configuration.homeAutomation = false
        configuration.statisticsInterval = nil
        return MessageProcessor(
            configuration: configuration, instanceID: "t", publisher: recorder, clock: clock.wallClock,
            logger: Logger(label: "test"), metrics: TestMetrics())
    }

    /// `payload`, encoded in `format`, on `topic` with its content type.
    func send(_ processor: MessageProcessor, _ topic: String, _ payload: [UInt8], in format: PayloadFormat) {
        processor.handle(
            MQTTMessage(topic: topic, payload: payload, properties: MQTTProperties(contentType: format.contentType)))
    }

    func telemetry(
        _ processor: MessageProcessor, _ request: AccessoryRequest, sequence: UInt64, in format: PayloadFormat,
        hub: String = "hub-1", accessory: String = "headphones"
    ) {
        let message = Audioaccessory_V1_AccessoryTelemetry(request, sequence: sequence, requestID: "r\(sequence)")
        send(processor, "audio/hubs/\(hub)/accessories/\(accessory)/telemetry", codec.encode(message, as: format), in: format)
    }

    func phoneReports(_ processor: MessageProcessor, _ activity: Activity, in format: PayloadFormat) {
        let state = Audioaccessory_V1_SourceState(SourceReport(activity: activity, headTracking: true))
        send(processor, "audio/sources/123456789abc/state", codec.encode(state, as: format), in: format)
    }

    /// Head-tracking headphones paired and registered by `hub`'s format, connected to the phone.
    func setUp(_ processor: MessageProcessor, hub: PayloadFormat) {
        telemetry(processor, .paired(name: "Studio", model: "S", hardwareCapabilities: .all), sequence: 1, in: hub)
        telemetry(processor, .register(.all), sequence: 2, in: hub)
        telemetry(processor, .sources(primary: Self.phone.data, secondary: nil), sequence: 3, in: hub)
    }

    /// The content type of each message published on a topic ending in `suffix`.
    func formats(_ messages: [MQTTMessage], _ suffix: String) -> [String?] {
        messages.filter { $0.topic.hasSuffix(suffix) }.map(\.properties.contentType)
    }

    static let json = PayloadFormat.json.contentType
    static let protobuf = PayloadFormat.protobuf.contentType

    @Test func aJSONBridgeSendsAProtobufHubAndDeviceProtobuf() throws {
        let processor = processor(default: .json)
        setUp(processor, hub: .protobuf)
        phoneReports(processor, .idle, in: .protobuf)
        telemetry(processor, .placement(.onHead), sequence: 4, in: .protobuf)
        _ = recorder.take()

        // The phone plays: a change no request of the hub's made.
        phoneReports(processor, .media, in: .protobuf)
        let published = recorder.take()
        #expect(formats(published, "/commands") == [Self.protobuf], "the phone's ROUTE")
        #expect(formats(published, "/headtracking") == [Self.protobuf, Self.protobuf], "the host's news, the hub's")
        // The news decodes as protobuf: the content type says what the bytes are.
        for message in published where message.topic.hasSuffix("/headtracking") {
            #expect(try codec.decode(HeadTrackingEvent.self, from: message.payload, format: .protobuf).event.kind == .activated)
        }
        // The accessory's state is in its hub's format.
        #expect(!formats(published, "/state").isEmpty)
        #expect(formats(published, "/state").allSatisfy { $0 == Self.protobuf })

        // A gap in the hub's sequence: the rebirth request too.
        telemetry(processor, .placement(.offHead), sequence: 9, in: .protobuf)
        #expect(formats(recorder.take(), "/rebirth") == [Self.protobuf])
    }

    @Test func aProtobufBridgeSendsAPersonsJSONHubAndDeviceJSON() throws {
        let processor = processor(default: .protobuf)
        setUp(processor, hub: .json)
        phoneReports(processor, .media, in: .json)
        _ = recorder.take()
        telemetry(processor, .placement(.onHead), sequence: 4, in: .json)
        let published = recorder.take()
        #expect(formats(published, "/commands") == [Self.json])
        #expect(formats(published, "/headtracking") == [Self.json, Self.json])
        let command = try #require(published.first { $0.topic.hasSuffix("/commands") })
        #expect(String(decoding: command.payload, as: UTF8.self).contains(#""action":"#))
    }

    @Test func theHostAndTheHubEachGetTheirOwnFormatOfOneNews() throws {
        let processor = processor(default: .protobuf)
        setUp(processor, hub: .protobuf)
        phoneReports(processor, .media, in: .json)
        _ = recorder.take()
        telemetry(processor, .placement(.onHead), sequence: 4, in: .protobuf)
        let news = recorder.take().filter { $0.topic.hasSuffix("/headtracking") }
        #expect(news.map(\.topic) == [
            "audio/sources/123456789abc/headtracking", "audio/hubs/hub-1/accessories/headphones/headtracking",
        ])
        #expect(news.map(\.properties.contentType) == [Self.json, Self.protobuf])
        let host = try codec.decode(HeadTrackingEvent.self, from: news[0].payload, format: .json).event
        let hub = try codec.decode(HeadTrackingEvent.self, from: news[1].payload, format: .protobuf).event
        #expect(host == hub, "the same news")
    }

    @Test func aPartyIsReadTheFormatItSpokeLast() throws {
        let processor = processor(default: .protobuf)
        setUp(processor, hub: .protobuf)
        phoneReports(processor, .idle, in: .json)
        telemetry(processor, .placement(.onHead), sequence: 4, in: .protobuf)
        phoneReports(processor, .media, in: .protobuf)
        #expect(formats(recorder.take(), "/commands") == [Self.protobuf])
        phoneReports(processor, .idle, in: .protobuf)
        telemetry(processor, .placement(.offHead), sequence: 5, in: .protobuf)
        phoneReports(processor, .media, in: .json)
        _ = recorder.take()
        telemetry(processor, .placement(.onHead), sequence: 6, in: .protobuf)
        #expect(formats(recorder.take(), "/commands") == [Self.json])
    }

    /// Telemetry from a hub the bridge keeps nothing of (about an accessory that does not exist) leaves nothing here
    /// either: made-up hub ids cannot grow what the bridge holds.
    @Test func aHubTheBridgeKeepsNothingOfIsNotKept() throws {
        let processor = processor(default: .protobuf)
        let ghost = HubID("ghost")!
        telemetry(processor, .register(.all), sequence: 1, in: .json, hub: "ghost", accessory: "nobody")
        let answer = try #require(recorder.take().first { $0.topic.hasSuffix("/result") })
        #expect(answer.properties.contentType == Self.json, "answered in its format all the same")
        #expect(processor.readerFormats.format(of: ghost) == .protobuf, "not kept")

        // A hub that pairs is kept.
        setUp(processor, hub: .json)
        #expect(processor.readerFormats.format(of: HubID("hub-1")!) == .json)
    }

    @Test func aHubsRetainedStatusAndTheDevicesRetainedStateTeachTheirFormats() throws {
        var formats = ReaderFormats(defaultFormat: .json)
        let hub = HubID("hub-1")!
        #expect(formats.format(of: hub) == .json && formats.format(of: Self.phone) == .json, "not heard from")
        formats.heard(hub, in: .protobuf)
        formats.heard(Self.phone, in: .protobuf)
        #expect(formats.format(of: hub) == .protobuf && formats.format(of: Self.phone) == .protobuf)
        #expect(formats.format(of: HubID("hub-2")!) == .json, "another hub")
        formats.heard(hub, in: .json)
        #expect(formats.format(of: hub) == .json && formats.format(of: Self.phone) == .protobuf)

        // Through the processor: a retained source state read at start-up.
        let processor = processor(default: .json)
        let state = Audioaccessory_V1_SourceState(SourceReport(activity: .media))
        processor.restore(
            MQTTMessage(
                topic: "audio/sources/123456789abc/state", payload: codec.encode(state, as: .protobuf), retain: true,
                properties: MQTTProperties(contentType: PayloadFormat.protobuf.contentType)))
        processor.restoringFinished()
        #expect(processor.readerFormats.format(of: Self.phone) == .protobuf)
    }
}
