import Testing

@testable import AccessoryModel

@Suite struct CaseCountsTests {
    @Test func countsAsADictionaryWouldAddingAndRemoving() {
        var random = SystemRandomNumberGenerator()
        for _ in 0..<50 {
            var counts = CaseCounts<Activity>()
            var expected: [Activity: Int] = [:]
            for _ in 0..<Int.random(in: 0..<40, using: &random) {
                let activity = Activity.allCases.randomElement(using: &random)!
                // One in three takes one away, when one was counted; a count back at zero leaves the dictionary.
                if Int.random(in: 0..<3, using: &random) == 0, let count = expected[activity] {
                    counts.remove(activity)
                    expected[activity] = count == 1 ? nil : count - 1
                } else {
                    counts.add(activity)
                    expected[activity, default: 0] += 1
                }
                #expect(counts.dictionary == expected)
            }
        }
    }

    @Test func casesNeverCountedAreLeftOut() {
        var counts = CaseCounts<Registration>()
        counts.add(.registered)
        counts.add(.registered)
        counts.add(.paired)
        #expect(counts.dictionary == [.registered: 2, .paired: 1])
        #expect(CaseCounts<Registration>().dictionary.isEmpty)
    }
}
