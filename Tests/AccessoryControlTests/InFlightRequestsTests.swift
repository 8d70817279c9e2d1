@testable import AccessoryControl
import AccessoryModel
import Synchronization
import Testing

/// The wait a rebirth's answer makes for an accessory's requests on the wire.
@Suite struct InFlightRequestsTests {
    static let buds = AccessoryID("buds")!
    static let other = AccessoryID("other")!

    private final class Flags: Sendable {
        let started = Atomic(0)
        let done = Atomic(false)
    }

    /// A request on the wire until `go` yields.
    private static func request(
        _ inFlight: InFlightRequests, _ flags: Flags, until go: AsyncStream<Void>
    ) -> Task<Void, any Error> {
        Task {
            try await inFlight.run(for: buds) { () async throws(AccessoryControlError) in
                flags.started.add(1, ordering: .relaxed)
                for await _ in go { break }
            }
        }
    }

    @Test func aWaitEndsWhenTheLastRequestOfThatAccessoryEnds() async throws {
        let inFlight = InFlightRequests()
        await inFlight.untilNone(of: Self.buds)  // none: at once
        let flags = Flags()
        let (first, firstGo) = AsyncStream<Void>.makeStream()
        let (second, secondGo) = AsyncStream<Void>.makeStream()
        let one = Self.request(inFlight, flags, until: first)
        let two = Self.request(inFlight, flags, until: second)
        while flags.started.load(ordering: .relaxed) < 2 { await Task.yield() }
        let waiting = Task {
            await inFlight.untilNone(of: Self.buds)
            flags.done.store(true, ordering: .relaxed)
        }
        await inFlight.untilNone(of: Self.other)  // another accessory's requests do not hold it
        firstGo.yield()
        try await one.value
        for _ in 0..<100 { await Task.yield() }
        let early = flags.done.load(ordering: .relaxed)
        #expect(!early, "one of two requests still on the wire")
        secondGo.yield()
        try await two.value
        await waiting.value
        let ended = flags.done.load(ordering: .relaxed)
        #expect(ended)
    }

    @Test func aFailedRequestEndsToo() async {
        let inFlight = InFlightRequests()
        do {
            try await inFlight.run(for: Self.buds) { () async throws(AccessoryControlError) in
                throw AccessoryControlError.unknown(reason: "no answer")
            }
            Issue.record("the request's failure was not thrown")
        } catch {}
        await inFlight.untilNone(of: Self.buds)
    }
}
