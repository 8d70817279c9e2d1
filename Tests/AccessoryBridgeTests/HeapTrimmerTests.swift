@testable import AccessoryBridge
import TestSupport
import Testing

struct HeapTrimmerTests {
    @Test func itTrimsOnceInTheFirstQuietIntervalAfterABusyOne() {
        var trimmer = HeapTrimmer()
        var decisions: [Bool] = []
        decisions.append(trimmer.intervalEnded())  // never busy: nothing to give back
        trimmer.busy()
        decisions.append(trimmer.intervalEnded())  // not while messages arrive
        trimmer.busy()
        trimmer.busy()
        decisions.append(trimmer.intervalEnded())
        decisions.append(trimmer.intervalEnded())  // the first quiet interval
        decisions.append(trimmer.intervalEnded())  // once
        trimmer.busy()
        decisions.append(trimmer.intervalEnded())
        decisions.append(trimmer.intervalEnded())  // after the next busy spell, again
        #expect(decisions == [false, false, false, true, false, false, true])
    }

    @Test func trimmingLeavesTheHeapUsable() async throws {
        try await inTheBackground {
            // Free heap with live blocks between, then malloc_trim: what stays allocated keeps its contents.
            var blocks = (0..<2_000).map { [UInt8](repeating: UInt8($0 % 251), count: 4_096 + $0) }
            for index in stride(from: 0, to: blocks.count, by: 2) { blocks[index] = [] }
            HeapTrimmer.trim()
            for index in stride(from: 1, to: blocks.count, by: 2) {
                #expect(blocks[index].count == 4_096 + index && blocks[index].allSatisfy { $0 == UInt8(index % 251) })
            }
        }
    }
}
