import CouchStore
import Testing

/// What a database remembers of the counts its paging clients asked for stays bounded: counts
/// of another state of the rows are dropped, positions too large are not kept, and no more than
/// sixteen are.
@Suite struct RememberedCountsTests {
    @Test func keepsABoundedNumberOfSmallPositionsForOneStateOfTheRows() {
        let counts = RememberedCounts<Int>()
        let state = RowsState(sequence: 10, purges: 0)
        counts.remember(.init(position: 1, count: 9), in: state, size: RememberedCounts<Int>.maximumPositionSize + 1)
        #expect(counts.counts(in: state).isEmpty)
        for position in 0..<40 { counts.remember(.init(position: position, count: 40 - position), in: state, size: 8) }
        #expect(counts.counts(in: state).map(\.position) == Array(24..<40))
        #expect(counts.nearest(to: 30, descending: false, in: state)?.count == 10)
        #expect(counts.nearest(to: 30, descending: true, in: state)?.position == 30)
        #expect(counts.nearest(to: 10, descending: false, in: state) == nil)
        #expect(counts.counts(in: RowsState(sequence: 10, purges: 1)).isEmpty)
        counts.remember(.init(position: 3, count: 1), in: RowsState(sequence: 11, purges: 0))
        #expect(counts.counts(in: state).isEmpty)
        #expect(counts.counts(in: RowsState(sequence: 11, purges: 0)).map(\.position) == [3])
    }
}
