import AccessoryModel
import Synchronization

/// One accessory's serial lane: its AudioAccessoryKit state machine behind a lock, so that the network thread and
/// the timer loop take turns and its states are published in the order they happened.
///
/// Lock order: a lane, then the routing engine; never the other way round.
final class AccessoryLane: Sendable {
    struct State: Sendable {
        var machine: AccessoryStateMachine
        /// The order of the hub's telemetry for this accessory.
        var sequences: SequenceTracker
        /// The last results sent, for duplicates.
        var recentResults = RecentResults()
        /// When the hub was last asked to send everything again, to ask at most once per interval.
        var lastRebirthRequest: Timestamp?
        /// The deadline the scheduler holds for this lane, so that it is scheduled once.
        var scheduledDeadline: Timestamp?
        /// Where the routing engine keeps this accessory, which spares it a lookup by id.
        var routingSlot: Int?
    }

    let id: AccessoryID
    private let state: Mutex<State>

    init(id: AccessoryID, policy: AccessoryStateMachine.Policy) {
        self.id = id
        self.state = Mutex(State(machine: AccessoryStateMachine(id: id, policy: policy), sequences: SequenceTracker()))
    }

    /// A lane that continues from a state published before a restart.
    init(restoring accessory: Accessory, policy: AccessoryStateMachine.Policy) {
        self.id = accessory.id
        self.state = Mutex(
            State(
                machine: AccessoryStateMachine(restoring: accessory, policy: policy),
                sequences: SequenceTracker(last: accessory.lastSequence)))
    }

    func withLock<Result: Sendable>(_ body: (inout State) -> Result) -> Result {
        state.withLock { body(&$0) }
    }
}

/// Every accessory's lane, created on the first request that can create the accessory (a pairing).
final class AccessoryLanes: Sendable {
    private let lanes = Mutex<[AccessoryID: AccessoryLane]>([:])
    let policy: AccessoryStateMachine.Policy

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

    /// Adds a lane restored from a published state (before any telemetry arrives).
    func insert(_ lane: AccessoryLane) {
        lanes.withLock { $0[lane.id] = lane }
    }

    /// Forgets the lane of an accessory that never came to exist (its pairing failed).
    func remove(_ id: AccessoryID) {
        _ = lanes.withLock { $0.removeValue(forKey: id) }
    }

    var all: [AccessoryLane] {
        lanes.withLock { Array($0.values) }
    }
}
