/// Exponential back-off: each failure doubles the wait, up to a ceiling; a success
/// starts over. Used for a request's retries (250 ms, 500 ms, 1 s, ... as CouchDB's
/// replicator waits) and for restarting a crashed or offline replication.
public struct Backoff: Sendable, Equatable {
    public let initialMilliseconds: Int
    public let maximumMilliseconds: Int
    public private(set) var failures = 0

    public init(initialMilliseconds: Int, maximumMilliseconds: Int) {
        self.initialMilliseconds = initialMilliseconds
        self.maximumMilliseconds = maximumMilliseconds
    }

    /// A request's retries: 250 ms doubling, at most 5 minutes (CouchDB's `?MAX_WAIT`).
    public static let request = Backoff(initialMilliseconds: 250, maximumMilliseconds: 300_000)
    /// Restarting a job: 1 s doubling, at most 5 minutes.
    public static let job = Backoff(initialMilliseconds: 1_000, maximumMilliseconds: 300_000)

    /// The wait before the next attempt; counts one more failure.
    public mutating func next() -> Int {
        let shift = min(failures, 30)
        let delay = min(maximumMilliseconds, initialMilliseconds.multipliedReportingOverflow(by: 1 << shift).overflow
                        ? maximumMilliseconds : initialMilliseconds << shift)
        failures += 1
        return delay
    }

    public mutating func reset() { failures = 0 }
}
