import AccessoryModel
import Synchronization

/// One accessory's serial lane: its AudioAccessoryKit state machine behind a lock, so that the network thread and
/// the timer loop take turns and its states are published in the order they happened.
///
/// Lock order: a lane, then the routing engine; never the other way round.
final class AccessoryLane: Sendable {
    struct State: Sendable {
        var machine: AccessoryStateMachine
        /// The deadline the scheduler holds for this lane, so that it is scheduled once.
        var scheduledDeadline: Timestamp?
    }

    let id: AccessoryID
    private let state: Mutex<State>

    init(id: AccessoryID, policy: AccessoryStateMachine.Policy) {
        self.id = id
        self.state = Mutex(State(machine: AccessoryStateMachine(id: id, policy: policy)))
    }

    func withLock<Result: Sendable>(_ body: (inout State) -> Result) -> Result {
        state.withLock { body(&$0) }
    }
}

/// Every accessory's lane, created on the first request that can create the accessory (a pairing).
final class AccessoryLanes: Sendable {
    private let lanes = Mutex<[AccessoryID: AccessoryLane]>([:])
    private let policy: AccessoryStateMachine.Policy

    init(policy: AccessoryStateMachine.Policy) {
        self.policy = policy
    }

    func existing(_ id: AccessoryID) -> AccessoryLane? {
        lanes.withLock { $0[id] }
    }

    func lane(for id: AccessoryID) -> AccessoryLane {
        lanes.withLock { lanes in
            if let lane = lanes[id] { return lane }
            let lane = AccessoryLane(id: id, policy: policy)
            lanes[id] = lane
            return lane
        }
    }

    /// Forgets the lane of an accessory that never came to exist (its pairing failed).
    func remove(_ id: AccessoryID) {
        _ = lanes.withLock { $0.removeValue(forKey: id) }
    }

    var all: [AccessoryLane] {
        lanes.withLock { Array($0.values) }
    }
}
