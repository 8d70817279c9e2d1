@testable import AccessoryBridge
import MetricsTestKit
import Testing

/// A member's gauges are the sum of its slots' shares, each taken back when its slot stops here.
@Suite struct BridgeMetricsTests {
    @Test func theSlotsSharesAddUpAndAStoppedSlotTakesItsShareBack() throws {
        let metrics = TestMetrics()
        let slot3 = BridgeMetrics(factory: metrics)
        let slot5 = BridgeMetrics(factory: metrics)
        func worn() throws -> Double? { try metrics.expectMeter("accessory_bridge_accessories_worn").lastValue }

        slot3.worn.record(3)
        slot5.worn.record(4)
        #expect(try worn() == 7)
        slot3.worn.record(1)
        #expect(try worn() == 5)
        slot3.worn.record(1)
        #expect(try worn() == 5, "the same value again changes nothing")

        slot5.brokerConnected.record(1)
        slot3.brokerConnected.record(1)
        #expect(try metrics.expectMeter("accessory_bridge_broker_connected").lastValue == 2)
        slot5.zeroGauges()
        #expect(try worn() == 1)
        #expect(try metrics.expectMeter("accessory_bridge_broker_connected").lastValue == 1)
        slot3.zeroGauges()
        #expect(try worn() == 0)
        #expect(try metrics.expectMeter("accessory_bridge_broker_connected").lastValue == 0)
    }
}
