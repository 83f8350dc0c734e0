import CouchReplication
import Testing

/// Exponential back-off, for requests and for jobs.
@Suite struct BackoffTests {
    @Test func doublesUpToTheCeilingAndStartsOverAfterReset() {
        var backoff = Backoff.request
        #expect((0..<5).map { _ in backoff.next() } == [250, 500, 1000, 2000, 4000])
        for _ in 0..<40 { _ = backoff.next() }
        #expect(backoff.next() == 300_000)
        backoff.reset()
        #expect(backoff.next() == 250)
    }
}
