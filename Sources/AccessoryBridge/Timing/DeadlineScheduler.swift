import AccessoryModel
import HeapModule
import Synchronization

/// The one clock's agenda: when each accessory's diagnostics and the routing engine's resume window next need a
/// tick. Filled from the network thread, drained by the timer loop.
final class DeadlineScheduler: Sendable {
    enum Owner: Hashable, Sendable {
        case routing
        case accessory(AccessoryID)
    }

    private struct Entry: Comparable, Sendable {
        var deadline: Timestamp
        var owner: Owner

        static func < (lhs: Entry, rhs: Entry) -> Bool { lhs.deadline < rhs.deadline }
        static func == (lhs: Entry, rhs: Entry) -> Bool { lhs.deadline == rhs.deadline && lhs.owner == rhs.owner }
    }

    private let agenda = Mutex(Heap<Entry>())

    func schedule(_ owner: Owner, at deadline: Timestamp) {
        agenda.withLock { $0.insert(Entry(deadline: deadline, owner: owner)) }
    }

    /// The earliest deadline, if any.
    var earliest: Timestamp? {
        agenda.withLock { $0.min?.deadline }
    }

    /// Removes and returns the owners whose deadline is at or before `now`, earliest first.
    func takeDue(at now: Timestamp) -> [Owner] {
        agenda.withLock { agenda in
            var due: [Owner] = []
            while let next = agenda.min, next.deadline <= now {
                due.append(agenda.removeMin().owner)
            }
            return due
        }
    }
}
