/// Network loops that many clients share: each a thread that waits on the connections of all the clients it runs and
/// serves whichever is ready, so that a process with hundreds of clients (a cluster member's slots, each a persistent
/// session of its own) runs them on a few threads, not one each. A client joins the loop with the
/// fewest clients when it is made (``MQTTClient/init(configuration:publishingSession:loops:logger:)``); a client made
/// without a group has a loop of its own.
///
/// A loop's thread runs while the loop has a client started and not yet stopped, so a group needs no shutdown.
/// Everything a handler does runs on its loop's thread, between the other clients' turns: a handler that blocks holds
/// up every client of its loop.
public final class MQTTLoopGroup: Sendable {
    private let loops: [NetworkLoop]

    /// `count` loops (at least one): at most one per core the clients' work may use. Their threads are named
    /// `mqtt-loop-1`, `mqtt-loop-2`, … (a client's own loop's `mqtt-loop`), which `top -H`, `ps -L` and profilers show.
    public init(count: Int) throws(MQTTError) {
        guard count >= 1 else { throw MQTTError.invalidArgument("a loop group needs at least one loop, not \(count)") }
        var loops: [NetworkLoop] = []
        for index in 1...count { loops.append(try NetworkLoop(name: "mqtt-loop-\(index)")) }
        self.loops = loops
    }

    /// How many loops the group has.
    public var count: Int { loops.count }

    /// The loop with the fewest clients.
    func leastBusy() -> NetworkLoop {
        loops.min { $0.assigned < $1.assigned }!
    }
}
