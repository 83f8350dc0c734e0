import CouchReplication
import Testing

/// The checkpoint rule: the highest sequence below which every batch is written.
@Suite struct SequenceMapTests {
    @Test func startsAtTheResumedSequence() {
        let map = SequenceMap<Int>(start: 7)
        #expect(map.checkpointable == 7)
        #expect(map.isIdle)
    }

    @Test func batchesCompletedInOrderAdvanceTheCheckpoint() {
        var map = SequenceMap<Int>()
        let first = map.begin(10)
        let second = map.begin(20)
        map.complete(first)
        #expect(map.checkpointable == 10)
        map.complete(second)
        #expect(map.checkpointable == 20)
        #expect(map.isIdle)
    }

    @Test func aLaterBatchDoesNotPassAnEarlierUnfinishedOne() {
        var map = SequenceMap<Int>(start: 0)
        let first = map.begin(10)
        let second = map.begin(20)
        let third = map.begin(30)
        map.complete(third)
        map.complete(second)
        #expect(map.checkpointable == 0)
        #expect(map.latestCompleted == 30, "the latest in feed order, not the last to finish")
        #expect(map.inFlightCount == 1)
        #expect(!map.isIdle)
        map.complete(first)
        #expect(map.checkpointable == 30)
        #expect(map.inFlightCount == 0)
    }

    @Test func opaqueSequencesAreOrderedByTicketNotValue() {
        var map = SequenceMap<String>()
        let first = map.begin("9-zzz")
        let second = map.begin("10-aaa")
        map.complete(second)
        #expect(map.checkpointable == nil)
        map.complete(first)
        #expect(map.checkpointable == "10-aaa")
    }

    @Test func manyBatchesInRandomOrderEndAtTheLast() {
        var map = SequenceMap<Int>()
        let tickets = (1...500).map { map.begin($0) }
        var generator = SplitMix(seed: 42)
        for ticket in tickets.shuffled(using: &generator) {
            let before = map.checkpointable ?? 0
            map.complete(ticket)
            #expect((map.checkpointable ?? 0) >= before)
        }
        #expect(map.checkpointable == 500)
        #expect(map.isIdle)
    }
}

/// A small seedable generator, so "random" orders repeat.
struct SplitMix: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
