import AccessoryModel
import DequeModule

/// In a cluster, a slot publishes nothing that shows a new listing of a playing device before etcd has it: whoever
/// takes the slot over reads its listings from the retained states and must find each in etcd too, or two slots could
/// route a device each thinks its own (docs/scale-out.md, "Shared devices").
///
/// The gate is the sub-machine of ``BridgeStateMachine`` that keeps that rule, as postgres-nio keeps its queued work
/// inside `ConnectionStateMachine`: from the first action after a new listing (``BridgeAction/watchSource(_:)``)
/// that is not itself a listing, everything waits — the rest of those actions (decided already), then every event
/// that comes meanwhile (decided only when it is its turn) — until etcd confirmed every listing
/// (``SharedDeviceEvent/listed(_:shared:)``). Then what waited goes, in the order it was decided, and stops again at
/// the next new listing: what that one holds back comes before what still waits. A single bridge has no gate.
struct ListingGate: Sendable {
    /// What waits, first in line first.
    enum Waiting: Sendable {
        /// The rest of a decision's actions.
        case actions(ArraySlice<BridgeAction>)
        /// An event to decide when it is its turn.
        case event(BridgeStateMachine.Event)
    }

    /// The playing devices whose listing etcd has not confirmed yet.
    private(set) var awaited: Set<BluetoothAddress> = []
    private var waiting: Deque<Waiting> = []

    /// Whether what comes now must wait behind what waits for etcd.
    var isHolding: Bool { !awaited.isEmpty || !waiting.isEmpty }

    /// Passes a decision's actions: returns those that run now. A new listing is awaited from its action on; the
    /// first action after it that is not a listing, and everything after that, wait, first in line (before what
    /// waited already: when this decision was itself waiting, it is the oldest).
    mutating func pass(_ actions: [BridgeAction]) -> [BridgeAction] {
        for (index, action) in actions.enumerated() {
            switch action {
            case .watchSource(let source):
                awaited.insert(source)
            case .unwatchSource:
                continue
            default:
                guard awaited.isEmpty else {
                    waiting.prepend(.actions(actions[index...]))
                    return Array(actions[..<index])
                }
            }
        }
        return actions
    }

    /// An event that came while the gate holds: it waits its turn.
    mutating func hold(_ event: BridgeStateMachine.Event) {
        waiting.append(.event(event))
    }

    /// etcd has the slot's listing of `source`.
    mutating func listed(_ source: BluetoothAddress) {
        awaited.remove(source)
    }

    /// What goes next, once etcd confirmed every listing; `nil` while one is awaited, or when nothing waits.
    mutating func next() -> Waiting? {
        guard awaited.isEmpty else { return nil }
        return waiting.popFirst()
    }
}
