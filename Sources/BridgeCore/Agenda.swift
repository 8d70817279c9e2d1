import AccessoryModel
import HeapModule

/// When each accessory's diagnostics, the routing engine's resume windows and hubs' offline grace next need a tick.
/// An entry whose owner has nothing to do by then costs one harmless tick; nothing is ever removed early.
struct Agenda: Sendable {
    enum Owner: Hashable, Sendable {
        case routing
        case accessory(AccessoryID)
        /// A hub that said offline: its grace ends.
        case hubOffline(HubID)
    }

    private struct Entry: Comparable, Sendable {
        var deadline: Timestamp
        var owner: Owner

        static func < (lhs: Entry, rhs: Entry) -> Bool { lhs.deadline < rhs.deadline }
        static func == (lhs: Entry, rhs: Entry) -> Bool { lhs.deadline == rhs.deadline && lhs.owner == rhs.owner }
    }

    private var entries = Heap<Entry>()
    /// The most entries held since the heap was last rebuilt: a heap's array never gives memory back, and a fleet's
    /// set-up leaves one entry per accessory for the diagnostics' grace period.
    private var peak = 0
    /// The routing engine's deadline as last scheduled, so that it is scheduled once.
    private var routingDeadline: Timestamp?

    var earliest: Timestamp? { entries.min?.deadline }

    mutating func schedule(_ owner: Owner, at deadline: Timestamp) {
        entries.insert(Entry(deadline: deadline, owner: owner))
        peak = max(peak, entries.count)
    }

    /// Schedules the routing engine's next deadline unless it is already.
    mutating func scheduleRouting(at deadline: Timestamp?) {
        guard let deadline, deadline != routingDeadline else { return }
        routingDeadline = deadline
        schedule(.routing, at: deadline)
    }

    /// Removes and returns the owners whose deadline is at or before `now`, earliest first.
    mutating func takeDue(at now: Timestamp) -> [Owner] {
        var due: [Owner] = []
        while let next = entries.min, next.deadline <= now {
            due.append(entries.removeMin().owner)
        }
        if due.contains(.routing) { routingDeadline = nil }
        if peak > 1024, entries.count < peak / 4 {
            entries = Heap(Array(entries.unordered))
            peak = entries.count
        }
        return due
    }
}
