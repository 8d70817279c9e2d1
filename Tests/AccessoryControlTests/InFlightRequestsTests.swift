@testable import AccessoryControl
import AccessoryModel
import Synchronization
import Testing

/// The wait a rebirth's answer makes for an accessory's requests on the wire.
@Suite struct InFlightRequestsTests {
    static let buds = AccessoryID("buds")!
    static let other = AccessoryID("other")!

    private final class Flags: Sendable {
        let done = Atomic(false)
    }

    /// A request on the wire until `go` yields; says so on `started` once it is.
    private static func request(
        _ inFlight: InFlightRequests, started: AsyncStream<Void>.Continuation, until go: AsyncStream<Void>
    ) -> Task<Void, any Error> {
        Task {
            try await inFlight.run(for: buds) { () async throws(AccessoryControlError) in
                started.yield()
                for await _ in go { break }
            }
        }
    }

    @Test func aWaitEndsWhenTheLastRequestOfThatAccessoryEnds() async throws {
        let inFlight = InFlightRequests()
        await inFlight.untilNone(of: Self.buds)  // none: at once
        let flags = Flags()
        let (started, starting) = AsyncStream<Void>.makeStream()
        let (first, firstGo) = AsyncStream<Void>.makeStream()
        let (second, secondGo) = AsyncStream<Void>.makeStream()
        let one = Self.request(inFlight, started: starting, until: first)
        let two = Self.request(inFlight, started: starting, until: second)
        var count = 0
        for await _ in started {
            count += 1
            if count == 2 { break }
        }
        let waiting = Task {
            await inFlight.untilNone(of: Self.buds)
            flags.done.store(true, ordering: .relaxed)
        }
        await inFlight.untilNone(of: Self.other)  // another accessory's requests do not hold it
        firstGo.yield()
        try await one.value
        // One of two still on the wire: the wait cannot have ended (it ends only when the last one does).
        let early = flags.done.load(ordering: .relaxed)
        #expect(!early && inFlight.count(of: Self.buds) == 1)
        secondGo.yield()
        try await two.value
        await waiting.value
        let ended = flags.done.load(ordering: .relaxed)
        #expect(ended && inFlight.count(of: Self.buds) == 0)
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
