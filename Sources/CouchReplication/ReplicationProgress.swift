import Foundation

/// What a job has done so far, shared by its workers and read by `_active_tasks`: the
/// counters, the sequence map of batches in flight, the last checkpointed sequence.
final class ReplicationProgress: @unchecked Sendable {
    private let lock = NSLock()
    private var statistics = ReplicationStatistics()
    private var map = SequenceMap<SourceSequence>()
    private var checkpointed: SourceSequence?
    /// Pending changes as last counted, and how many had been processed then: the count
    /// goes down as changes are processed, until the next count.
    private var pending: (count: Int, processedThen: Int)?
    private var updated = Date()

    struct Snapshot: Sendable {
        let statistics: ReplicationStatistics
        let checkpointedSequence: SourceSequence?
        /// The latest batch written (CouchDB's `source_seq`).
        let sourceSequence: SourceSequence?
        /// Every change up to here is written (CouchDB's `through_seq`).
        let throughSequence: SourceSequence?
        let changesPending: Int?
        let updatedOn: Date
    }

    /// A new session resumes at `start` (its checkpoint).
    func startSession(at start: SourceSequence) {
        lock.lock()
        map = SequenceMap(start: start)
        checkpointed = start
        updated = Date()
        lock.unlock()
    }

    /// Registers a batch taken from the feed, in feed order.
    func begin(_ sequence: SourceSequence) -> Int {
        lock.lock()
        defer { lock.unlock() }
        return map.begin(sequence)
    }

    func complete(_ ticket: Int, adding increment: ReplicationStatistics) {
        lock.lock()
        map.complete(ticket)
        statistics += increment
        updated = Date()
        lock.unlock()
    }

    /// The counters raised to a resumed checkpoint's (`ReplicationStatistics.raise`).
    func raise(to counted: ReplicationStatistics) {
        lock.withLock { statistics.raise(to: counted) }
    }

    func add(_ increment: ReplicationStatistics) {
        lock.lock()
        statistics += increment
        updated = Date()
        lock.unlock()
    }

    var checkpointable: SourceSequence? {
        lock.lock()
        defer { lock.unlock() }
        return map.checkpointable
    }

    var latestCompleted: SourceSequence? {
        lock.lock()
        defer { lock.unlock() }
        return map.latestCompleted ?? map.checkpointable
    }

    var isIdle: Bool {
        lock.lock()
        defer { lock.unlock() }
        return map.isIdle
    }

    var currentStatistics: ReplicationStatistics {
        lock.lock()
        defer { lock.unlock() }
        return statistics
    }

    func recordCheckpoint(_ sequence: SourceSequence) {
        lock.lock()
        checkpointed = sequence
        updated = Date()
        lock.unlock()
    }

    func setPending(_ count: Int?) {
        lock.lock()
        pending = count.map { ($0, statistics.changesProcessed) }
        lock.unlock()
    }

    var snapshot: Snapshot {
        lock.lock()
        defer { lock.unlock() }
        return Snapshot(statistics: statistics, checkpointedSequence: checkpointed,
                        sourceSequence: map.latestCompleted ?? map.checkpointable,
                        throughSequence: map.checkpointable,
                        changesPending: pending.map { max(0, $0.count - (statistics.changesProcessed - $0.processedThen)) },
                        updatedOn: updated)
    }
}
