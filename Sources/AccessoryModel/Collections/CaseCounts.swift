/// How many of each case of a small enum were counted, without hashing each one: the bridge keeps a count of its
/// accessories by registration and of its sources by activity, changed with every saved accessory and every source
/// report, where a dictionary would hash on each.
public struct CaseCounts<Case: CaseIterable & Hashable> {
    // Inlinable, so that each user's counting is specialized for its enum rather than comparing through witness tables.
    @usableFromInline let cases = Array(Case.allCases)
    @usableFromInline var counts: [Int]

    @inlinable
    public init() {
        counts = Array(repeating: 0, count: cases.count)
    }

    /// Counts one more `value`.
    @inlinable
    public mutating func add(_ value: Case) {
        // A few cases: comparing them one by one is quicker than hashing.
        for index in cases.indices where cases[index] == value {
            counts[index] += 1
            return
        }
    }

    /// Counts one `value` fewer: one that was counted.
    @inlinable
    public mutating func remove(_ value: Case) {
        for index in cases.indices where cases[index] == value {
            assert(counts[index] > 0, "removing \(value), which was not counted")
            counts[index] -= 1
            return
        }
    }

    /// The counts of the cases counted at least once.
    public var dictionary: [Case: Int] {
        Dictionary(uniqueKeysWithValues: zip(cases, counts).filter { $0.1 > 0 })
    }
}

extension CaseCounts: Sendable where Case: Sendable {}
