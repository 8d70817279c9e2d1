import Cluster
import Testing
import TestSupport

/// Rendezvous hashing: every member computes the same owner, and a member joining or leaving moves only about S/N
/// slots (only those it gains or loses).
@Suite struct RendezvousTests {
    static func assignment(_ members: Set<String>, slots: Int) -> [Int: String] {
        Dictionary(uniqueKeysWithValues: (0..<slots).map { ($0, Rendezvous.owner(of: $0, among: members)!) })
    }

    @Test func everyMemberComputesTheSameOwnerWhateverTheOrder() {
        let members = ["b-1", "b-2", "b-3", "b-4"]
        for slot in 0..<64 {
            let owner = Rendezvous.owner(of: slot, among: members)
            #expect(Rendezvous.owner(of: slot, among: members.reversed()) == owner)
            #expect(Rendezvous.owner(of: slot, among: Set(members)) == owner)
        }
        #expect(Rendezvous.owner(of: 3, among: [String]()) == nil)
    }

    /// Over many member sets: a join moves exactly the slots the new member wins (none between old members), a leave
    /// exactly the slots the leaver had, and both about S/N.
    @Test(arguments: [12, 64, 256])
    func aJoinOrALeaveMovesOnlyAboutSOverNSlots(slots: Int) async throws {
        // CPU-bound: off the cooperative pool (a closure holding the body itself crashed Swift 6.3.1's
        // SendNonSendable pass).
        try await inTheBackground { Self.joinsAndLeaves(slots: slots) }
    }

    static func joinsAndLeaves(slots: Int) {
        var moved: [Double] = []
        for n in 2...8 {
            for trial in 0..<20 {
                let members = Set((0..<n).map { "m\(trial)-\($0)" })
                let before = Self.assignment(members, slots: slots)
                let joiner = "m\(trial)-new"
                let after = Self.assignment(members.union([joiner]), slots: slots)
                let changed = (0..<slots).filter { before[$0] != after[$0] }
                #expect(changed.allSatisfy { after[$0] == joiner }, "a join moves slots only to the joiner")
                moved.append(Double(changed.count) / (Double(slots) / Double(n + 1)))

                let leaver = members.sorted().first!
                let left = Self.assignment(members.subtracting([leaver]), slots: slots)
                let lost = (0..<slots).filter { before[$0] != left[$0] }
                #expect(Set(lost) == Set((0..<slots).filter { before[$0] == leaver }), "a leave moves only its slots")
            }
        }
        // On average a join moves S/(N+1) slots (within 20% over these 140 sets).
        let mean = moved.reduce(0, +) / Double(moved.count)
        #expect(abs(mean - 1) < 0.2, "moved \(mean) × S/N on average")
    }

    @Test func slotsSpreadOverMembers() {
        let members: Set = ["a", "b", "c"]
        let counts = Dictionary(grouping: 0..<64, by: { Rendezvous.owner(of: $0, among: members)! }).mapValues(\.count)
        #expect(counts.count == 3)
        #expect(counts.values.allSatisfy { $0 >= 10 }, "\(counts)")
        #expect(Rendezvous.slots(of: "a", among: members, count: 64).count == counts["a"])
    }

    @Test func keysSayWhatTheyAreAbout() {
        let keys = ClusterKeys(cluster: "home")
        #expect(keys.member("b-1") == "/aab/home/members/b-1")
        #expect(keys.slot(7) == "/aab/home/slots/7")
        #expect(keys.subject(of: keys.member("b-1")) == .member("b-1"))
        #expect(keys.subject(of: keys.slot(7)) == .slot(7))
        #expect(keys.subject(of: "/aab/home/slots/x") == nil)
        #expect(keys.subject(of: "/aab/other/slots/7") == nil)
        #expect(keys.subject(of: "/aab/home/members/") == nil)
    }
}
