@testable import AccessoryBridge
import AccessoryModel
import AccessoryWire
import Dispatch
import Logging
import MQTTClient
import MetricsTestKit
import Testing

/// The start-up read in its two stages: the reader's thread decodes, the caller's task restores, with at most
/// ``RetainedStates/batchesAhead`` batches between them. (ReliabilityTests restart a real bridge on a real broker.)
@Suite struct RetainedStatesTests {
    let processor = MessageProcessor(
        configuration: BridgeConfiguration(mqtt: MQTTConfiguration(clientID: "test")), instanceID: "t",
        publisher: MessageProcessorTests.Recorder(), clock: MessageProcessorTests.TestClock().wallClock,
        logger: Logger(label: "test"), metrics: TestMetrics())
    static let marker = MQTTMessage(topic: "audio/bridge/rebuild/test", payload: [])

    /// Retained states of `count` registered accessories, as the bridge published them.
    static func states(_ count: Int) -> [MQTTMessage] {
        let codec = WireCodec()
        return (0..<count).map { index in
            let accessory = Accessory(
                id: AccessoryID("acc-\(index)")!, hub: HubID("hub-\(index % 7)")!, registration: .registered,
                name: "Accessory \(index)", hardwareCapabilities: .all,
                configuration: Configuration(devicePlacement: .onHead, deviceCapabilities: .all),
                lastSequence: UInt64(index), updatedAt: Timestamp(unixMilliseconds: 1_763_790_000_000))
            return MQTTMessage(
                topic: "audio/accessories/acc-\(index)/state",
                payload: codec.encoded(AccessoryState(accessory, routedSource: nil), as: .protobuf).bytes, retain: true)
        }
    }

    /// Hands `messages` to `collected` on a thread of its own, as libmosquitto's network thread does; returns once
    /// that thread is done (as closing the reader joins it).
    static func read(_ messages: [MQTTMessage], into collected: RetainedStates) async {
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            DispatchQueue.global().async {
                for message in messages { collected.receive(message) }
                done.resume()
            }
        }
    }

    @Test func moreStatesThanTheBatchesAheadAreAllTakenBack() async {
        // More than batchesAhead full batches, and a partial one: the reader waits for room, and the last batch is
        // sent at the end of the input.
        let count = RetainedStates.batchSize * (RetainedStates.batchesAhead + 2) + 7
        let collected = RetainedStates(marker: Self.marker.topic, processor: processor)
        async let restoring: Void = collected.restoreAll()
        await Self.read(Self.states(count) + [Self.marker], into: collected)
        await collected.finished()
        collected.endOfInput()
        await restoring
        let restored = processor.restoringFinished()
        #expect(restored.accessories == count)
        #expect(restored.skipped == 0)
    }

    @Test func whatArrivesAfterTheReadEndedIsNotTaken() async {
        let collected = RetainedStates(marker: Self.marker.topic, processor: processor)
        async let restoring: Void = collected.restoreAll()
        let states = Self.states(10)
        await Self.read(Array(states.prefix(4)) + [Self.marker] + states.suffix(6), into: collected)
        await collected.finished()
        collected.endOfInput()
        await restoring
        #expect(processor.restoringFinished().accessories == 4)
    }

    /// A shutdown during the read: restoring stops, and the reader never waits for room that will not come.
    @Test func aCancelledRestoreNeverBlocksTheReader() async {
        let collected = RetainedStates(marker: Self.marker.topic, processor: processor)
        let restoring = Task { await collected.restoreAll() }
        restoring.cancel()
        await restoring.value
        await Self.read(Self.states(RetainedStates.batchSize * (RetainedStates.batchesAhead + 2)), into: collected)
        collected.finish()
        collected.endOfInput()
    }
}
