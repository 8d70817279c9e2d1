import AccessoryModel
import AccessoryWire
import MQTTClient
import Synchronization

/// An ``AccessoryHub``'s connection, one at a time, and whether its requests may go out on it. A hub given its slot
/// count has one connection for its life, serving from the start; a hub that follows the bridge's layout
/// (``AccessoryHub/Options/followsLayout``) first has a connection that only learns the layout, and a new one under
/// its root at each move, serving once the hub is born again there. Requests wait while none serves.
final class HubLink: Sendable {
    /// A connection, the root of the hub's topics on it and its response topic there (`nil`: learning the layout; it
    /// publishes nothing).
    struct Connection: Sendable {
        let client: MQTTClient
        let root: TopicRoot?
        let responseTopic: String?
    }

    private struct State {
        var connection: Connection?
        var serving = false
        var stopped = false
        var waiters: [UInt64: CheckedContinuation<Connection?, Never>] = [:]
        var nextWaiter: UInt64 = 0
    }

    private let state = Mutex(State())

    /// The connection now, serving or not.
    var connection: Connection? {
        state.withLock { $0.connection }
    }

    /// Makes `connection` the link's, not serving yet (the caller closed the one before). A stopped link takes none:
    /// `false`, and the caller closes its client.
    func install(_ connection: Connection) -> Bool {
        state.withLock { state in
            guard !state.stopped else { return false }
            state.connection = connection
            state.serving = false
            return true
        }
    }

    /// Requests wait from now on (the hub moves).
    func suspend() {
        state.withLock { $0.serving = false }
    }

    /// Requests go out on the connection now, the waiting ones first.
    func serve() {
        let (connection, waiters) = state.withLock { state -> (Connection?, [CheckedContinuation<Connection?, Never>]) in
            guard !state.stopped, let connection = state.connection else { return (nil, []) }
            state.serving = true
            defer { state.waiters.removeAll() }
            return (connection, Array(state.waiters.values))
        }
        for waiter in waiters { waiter.resume(returning: connection) }
    }

    /// The hub stops: no request goes out any more (those waiting get `nil`); returns the connection, to be closed.
    func stop() -> Connection? {
        let (connection, waiters) = state.withLock { state -> (Connection?, [CheckedContinuation<Connection?, Never>]) in
            state.stopped = true
            state.serving = false
            defer { state.waiters.removeAll() }
            return (state.connection, Array(state.waiters.values))
        }
        for waiter in waiters { waiter.resume(returning: nil) }
        return connection
    }

    /// The serving connection, once there is one within `timeout` (`nil`: none came, or the hub stopped).
    func serving(within timeout: Duration) async -> Connection? {
        let id = state.withLock { state in
            state.nextWaiter += 1
            return state.nextWaiter
        }
        return await withCheckedContinuation { continuation in
            let now: Connection?? = state.withLock { state in
                if state.serving { return .some(state.connection) }
                if state.stopped { return .some(nil) }
                state.waiters[id] = continuation
                return .none
            }
            if let now {
                continuation.resume(returning: now)
                return
            }
            Task { [weak self] in
                try? await Task.sleep(for: timeout)
                self?.state.withLock { $0.waiters.removeValue(forKey: id) }?.resume(returning: nil)
            }
        }
    }

    /// Publishes on the connection now (a head-tracking frame: it never waits for a move).
    func publish(_ message: MQTTMessage) throws(MQTTError) {
        guard let connection = state.withLock({ $0.serving ? $0.connection : nil }) else {
            throw MQTTError(kind: .notConnected, code: 0, message: "the hub is not connected under its root yet")
        }
        try connection.client.publish(message)
    }
}
