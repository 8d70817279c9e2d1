@testable import AccessoryBridge
import AccessoryModel
@testable import AccessoryWire
import Logging
import MQTTClient
import MetricsTestKit
import Synchronization
import Testing

/// A cluster's slot and the playing devices its accessories list (docs/scale-out.md, "Shared devices"): it publishes
/// nothing that shows a new listing before etcd has it, so that whoever takes the slot over from its retained states
/// finds every listing there too.
@Suite struct SlotListingTests {
    final class Requests: Sendable {
        let all = Mutex<[SharedDeviceRequest]>([])
    }

    let recorder = MessageProcessorTests.Recorder()
    let clock = MessageProcessorTests.TestClock()
    let requests = Requests()
    let link: SharedDeviceLink
    let processor: MessageProcessor
    let codec = WireCodec()
    let root: String
    static let phone = BluetoothAddress("12:34:56:78:9A:BC")!

    init() {
        var configuration = BridgeConfiguration(mqtt: MQTTConfiguration(clientID: "test"))
        configuration.homeAutomation = false
        configuration.statisticsInterval = nil
        let slots = ClusterSlots(12)!
        let number = slots.slot(of: HubID("hub-1")!)
        root = "audio/slots/\(number)"
        let requests = requests
        link = SharedDeviceLink { request in requests.all.withLock { $0.append(request) } }
        processor = MessageProcessor(
            configuration: configuration, instanceID: "t", publisher: recorder, clock: clock.wallClock,
            logger: Logger(label: "test"), metrics: TestMetrics(),
            slot: ServedSlot(ClusterSlot(number, of: slots)!, epoch: 7), sharedDevices: link)
    }

    func telemetry(_ request: AccessoryRequest, sequence: UInt64) {
        let message = Audioaccessory_V1_AccessoryTelemetry(request, sequence: sequence, requestID: "r\(sequence)")
        processor.handle(
            MQTTMessage(
                topic: "\(root)/hubs/hub-1/accessories/headphones/telemetry", payload: codec.encode(message, as: .protobuf)))
    }

    func answeredSequences() throws -> [UInt64] {
        try recorder.take().filter { $0.topic.hasSuffix("/result") }.map {
            try codec.decode(Audioaccessory_V1_RequestResult.self, from: $0.payload, format: .protobuf).sequence
        }
    }

    @Test func nothingShowsANewListingBeforeEtcdHasIt() throws {
        telemetry(.paired(name: "Studio", model: "S", hardwareCapabilities: .all), sequence: 1)
        telemetry(.register(.all), sequence: 2)
        #expect(try answeredSequences() == [1, 2])

        // The sources list the phone: the slot asks etcd to add it to the phone's listers, and holds what follows.
        telemetry(.sources(primary: Self.phone.data, secondary: nil), sequence: 3)
        #expect(requests.all.withLock { $0 } == [.listed(Self.phone)])
        #expect(recorder.subscriptions.withLock { $0 } == ["audio/sources/123456789abc/state"])
        telemetry(.placement(.onHead), sequence: 4)
        processor.wake()
        #expect(try answeredSequences() == [], "no answer or state before etcd has the listing")

        // etcd has it (not shared): what waited goes out, in order.
        link.post([.listed(Self.phone, shared: false)])
        processor.wake()
        #expect(try answeredSequences() == [3, 4])
        telemetry(.placement(.offHead), sequence: 5)
        #expect(try answeredSequences() == [5], "nothing waits once etcd answered")
    }
}
