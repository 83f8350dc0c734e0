import CouchCore
import Foundation
import Synchronization

/// The single writer of one database. Concurrent writers queue here; whoever finds
/// no batch running becomes the leader and commits every queued write in one
/// transaction with one fsync (group commit). Each write runs in its own savepoint,
/// so a failed write leaves nothing behind and does not affect its neighbours.
///
/// A leader waits a little for company before it begins a batch: when the last batch ended
/// with more writes outstanding than are queued now, up to one commit's duration for the
/// others to come back with their next write. (Without it ten steady writers split into two
/// groups of five that took turns, each group's commit waiting on the other's, two fsyncs
/// where one would do.) A lone writer never waits.
///
/// A waiting writer sleeps on a semaphore of its own and is woken once: when its write is
/// done, or when the leader hands it the writer. (Woken all together by one condition,
/// most writers found their write still queued and slept again: with 10 writers a third of
/// the server's time went to switching threads.) A writer woken with its write done returns
/// without the queue's lock: the leader wakes its whole batch holding it, and each woken
/// writer had gone back to sleep on it at once.
///
/// The log is checkpointed beside the writer, not by it (`checkpointIfDue`): a checkpoint of
/// 1,000 pages took 6-7 ms, and the write whose commit had made it due waited for it (a third
/// of a 1,000-document `_bulk_docs` request's time, on average, came from those).
///
/// The writer connection is closed when the database has been idle a while (`closeIfIdle`) and
/// opened again by the next write, so an idle open database holds no file descriptor.
final class WriteQueue: @unchecked Sendable {
    /// Nil while closed for idleness; only the holder of the writer (`batchRunning`) touches it.
    private var connection: SQLiteConnection?
    private let reopen: () throws(CouchError) -> SQLiteConnection
    private var lastUse = DispatchTime.now().uptimeNanoseconds
    /// Guards the state below; waited on only by `performOutsideTransaction`.
    private let condition = NSCondition()
    private var pending: [PendingWrite] = []
    /// Whether a leader (or an operation outside transactions) holds the writer.
    private var batchRunning = false
    private var exclusiveWaiters = 0
    /// How many writes were outstanding together at the end of the last batch (its own and
    /// those queued behind it): how many a leader waits for.
    private var expectedWriters = 1
    /// Whether a leader is waiting for `expectedWriters`; the write that completes the number
    /// wakes it, once. (A wake-up that comes after the wait timed out only shortens the next.)
    private var lingering = false
    private let companyArrived = DispatchSemaphore(value: 0)
    /// How long the last `COMMIT` took, in nanoseconds: the longest a leader waits.
    private var lastCommitNanoseconds: UInt64 = 0
    static let maximumLingerNanoseconds: UInt64 = 2_000_000
    /// Read without the queue's lock by every reader of `update_seq` (an atomic, so a read
    /// during a commit sees the old or the new sequence, never a torn one).
    private let committed: Atomic<Int>
    var committedSequence: Int { committed.load(ordering: .acquiring) }
    /// Transactions committed (or tried: a failed `COMMIT` counts too), counted before any of
    /// their writes is acknowledged; the readers renew their snapshots when it moves.
    private let commits = Atomic<Int>(0)
    var commitCount: Int { commits.load(ordering: .acquiring) }
    /// Whose kept snapshots must not hold back a checkpoint; set once by the database.
    weak var readers: ReaderPool?
    /// Called after each commit with the new update sequence, outside the lock.
    var onCommit: (@Sendable (Int) -> Void)?
    static let maximumBatch = 1000
    /// Checkpoints beside the writer: at most one queued or running per database.
    private enum CheckpointState: UInt8, AtomicRepresentable {
        case idle
        case running
        /// The last one has ended. If the log is still long at the next commit, it was not
        /// started again: pages were committed while the checkpoint ran (or a reader held it back).
        case ended
    }
    private let checkpointState = Atomic<CheckpointState>(.idle)
    /// Held by a checkpoint and by operations outside transactions, so that one waits for the other.
    private let checkpointLock = NSLock()
    /// The checkpoints of every database, one at a time: they are mostly the disk's work.
    private static let checkpoints = DispatchQueue(label: "couchette.checkpoints", qos: .utility)
    /// A log this long is checkpointed by the writer itself, before the commit that made it so
    /// is acknowledged: the checkpoints beside it fell behind its writes.
    static let checkpointBacklogPages = 2 * SQLiteConnection.checkpointPages

    init(connection: SQLiteConnection, committedSequence: Int,
         reopen: @escaping () throws(CouchError) -> SQLiteConnection) {
        self.connection = connection
        self.reopen = reopen
        committed = Atomic(committedSequence)
    }

    /// The writer connection, opened again if it was closed for idleness. Called only by
    /// the holder of `batchRunning`.
    private func openConnection() throws(CouchError) -> SQLiteConnection {
        lastUse = DispatchTime.now().uptimeNanoseconds
        if let connection { return connection }
        let opened = try reopen()
        connection = opened
        return opened
    }

    /// Closes the writer connection if no write has run for `seconds` (and none waits).
    @discardableResult
    func closeIfIdle(for seconds: Double) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        guard !batchRunning, pending.isEmpty, connection != nil,
              DispatchTime.now().uptimeNanoseconds &- lastUse > UInt64(seconds * 1e9) else { return false }
        connection = nil
        return true
    }

    private final class PendingWrite {
        let operation: (WriteTransaction) throws -> Void
        /// Signalled once: the write is done, or its writer now leads.
        let wakeUp = DispatchSemaphore(value: 0)
        /// Set by the leader once the write's batch has ended, after `error` and the result;
        /// read by its writer when woken, without the queue's lock.
        private let done = Atomic<Bool>(false)
        var error: Error?
        init(_ operation: @escaping (WriteTransaction) throws -> Void) { self.operation = operation }

        var isDone: Bool { done.load(ordering: .acquiring) }
        func markDone() { done.store(true, ordering: .releasing) }

        /// The write's result, or its error, once done.
        func outcome<T>(_ result: T?) throws -> T {
            if let error { throw error }
            return result!
        }
    }

    func perform<T>(_ operation: @escaping (WriteTransaction) throws -> T) throws -> T {
        var result: T?
        let write = PendingWrite { transaction in result = try operation(transaction) }
        condition.lock()
        pending.append(write)
        if lingering, pending.count >= expectedWriters {
            lingering = false
            companyArrived.signal()
        }
        if batchRunning {
            condition.unlock()
            write.wakeUp.wait()
            // Done by a leader: the result is here, and the lock (which the leader holds while
            // it wakes the whole batch) is not needed; otherwise this writer now leads.
            if write.isDone { return try write.outcome(result) }
            condition.lock()
        } else {
            batchRunning = true
        }
        // Done by another leader's batch, or leading: run batches until this write is done.
        while !write.isDone {
            awaitExpectedWriters()
            let batch = Array(pending.prefix(Self.maximumBatch))
            pending.removeFirst(batch.count)
            let startSequence = committedSequence
            condition.unlock()
            let newSequence = run(batch, startSequence: startSequence)
            condition.lock()
            expectedWriters = min(Self.maximumBatch, batch.count + pending.count)
            batch.forEach { $0.markDone() }
            committed.store(newSequence, ordering: .releasing)
            if write.isDone { releaseWriter() }
            for other in batch where other !== write { other.wakeUp.signal() }
            if newSequence != startSequence, let onCommit {
                condition.unlock()
                onCommit(newSequence)
                condition.lock()
            }
        }
        condition.unlock()
        return try write.outcome(result)
    }

    /// Under the lock, as the leader: waits until as many writes are queued as were outstanding
    /// together last time, or one commit's duration has passed. What arrived then is what the
    /// next batch expects. (A semaphore, not the condition: its timeout runs on the monotonic
    /// clock, so a wall clock set back cannot stall the writer.)
    private func awaitExpectedWriters() {
        guard pending.count < expectedWriters, exclusiveWaiters == 0, lastCommitNanoseconds > 0 else { return }
        let wait = min(lastCommitNanoseconds, Self.maximumLingerNanoseconds)
        let deadline = DispatchTime.now() + .nanoseconds(Int(wait))
        while pending.count < expectedWriters {
            lingering = true
            condition.unlock()
            let outcome = companyArrived.wait(timeout: deadline)
            condition.lock()
            if outcome == .timedOut { break }
        }
        lingering = false
        expectedWriters = max(1, pending.count)
    }

    /// Gives the writer up, under the lock: to an operation waiting to run outside
    /// transactions, else to the first queued write, else to whoever comes next.
    private func releaseWriter() {
        if exclusiveWaiters > 0 {
            batchRunning = false
            condition.broadcast()
        } else if let next = pending.first {
            next.wakeUp.signal()
        } else {
            batchRunning = false
        }
    }

    /// Runs `operation` on the writer connection with no transaction open and no
    /// other write running (VACUUM, checkpoints).
    func performOutsideTransaction(_ operation: (SQLiteConnection) throws -> Void) throws {
        condition.lock()
        exclusiveWaiters += 1
        while batchRunning { condition.wait() }
        exclusiveWaiters -= 1
        batchRunning = true
        condition.unlock()
        defer {
            condition.lock()
            releaseWriter()
            condition.unlock()
        }
        defer { commits.add(1, ordering: .releasing) }
        let connection = try openConnection()
        try checkpointLock.withLock {
            if let readers {
                try readers.withoutSnapshots { try operation(connection) }
            } else {
                try operation(connection)
            }
        }
    }

    /// Runs a batch in one transaction; returns the committed sequence.
    private func run(_ batch: [PendingWrite], startSequence: Int) -> Int {
        let connection: SQLiteConnection
        do {
            connection = try openConnection()
            try connection.run("BEGIN IMMEDIATE")
        } catch {
            batch.forEach { $0.error = error }
            return startSequence
        }
        let transaction = WriteTransaction(connection: connection, sequence: startSequence)
        // A write alone in its transaction needs no savepoint: if it fails, the transaction is
        // rolled back (two statements fewer for each lone `PUT`).
        let isAlone = batch.count == 1
        for write in batch {
            let saved = transaction.state
            do {
                if !isAlone { try connection.run("SAVEPOINT write") }
                try write.operation(transaction)
                if !isAlone { try connection.run("RELEASE write") }
            } catch {
                // A full disk or an I/O error may have rolled the whole transaction back:
                // then the writes before this one are gone too, and the ones after must not
                // run outside a transaction (each would commit on its own, unacknowledged).
                if connection.isAutocommit || isAlone {
                    if !connection.isAutocommit { try? connection.run("ROLLBACK") }
                    for other in batch where other.error == nil || other === write { other.error = error }
                    return startSequence
                }
                transaction.state = saved
                try? connection.run("ROLLBACK TO write")
                try? connection.run("RELEASE write")
                write.error = error
            }
        }
        do {
            defer { commits.add(1, ordering: .releasing) }
            try transaction.recordCounts()
            let started = DispatchTime.now().uptimeNanoseconds
            try connection.run("COMMIT")
            lastCommitNanoseconds = DispatchTime.now().uptimeNanoseconds - started
        } catch {
            try? connection.run("ROLLBACK")
            for write in batch where write.error == nil { write.error = error }
            return startSequence
        }
        checkpointIfDue(connection)
        return transaction.sequence
    }

    /// After a commit that left the log past SQLite's usual threshold: a checkpoint on one of
    /// the readers' connections, beside the writer, whose next write need not wait for it. The
    /// writer checkpoints itself, before the commit is acknowledged, when the log is still long
    /// after one beside it ended (a short copy of what was committed meanwhile: until the log is
    /// wholly in the database the next write cannot start it again from its beginning, and a
    /// log grown past its usual length makes every commit's sync longer), past
    /// `checkpointBacklogPages`, or without readers.
    private func checkpointIfDue(_ connection: SQLiteConnection) {
        let pages = connection.walPages
        let state = checkpointState.load(ordering: .acquiring)
        guard pages >= SQLiteConnection.checkpointPages else {
            if state == .ended { checkpointState.store(.idle, ordering: .releasing) }
            return
        }
        if pages < Self.checkpointBacklogPages, state != .ended, let readers {
            if state == .idle { checkpointBeside(readers) }
            return
        }
        checkpointLock.withLock {
            readers?.endStaleSnapshots()
            connection.checkpoint()
        }
        // This copied what the one beside the writer left; one still to run sets its own state.
        _ = checkpointState.compareExchange(expected: .ended, desired: .idle, ordering: .acquiringAndReleasing)
    }

    private func checkpointBeside(_ readers: ReaderPool) {
        checkpointState.store(.running, ordering: .releasing)
        Self.checkpoints.async { [weak self, weak readers] in
            guard let self else { return }
            self.checkpointLock.withLock {
                readers?.checkpoint()
                self.checkpointState.store(.ended, ordering: .releasing)
            }
        }
    }
}

/// What a write sees: the writer connection inside an open transaction, and the
/// database's update sequence and document counts as they stand within it.
final class WriteTransaction {
    /// What a failed write must undo besides its SQL (restored with its savepoint).
    struct State {
        var sequence: Int
        var counts = DocumentCounts()
    }

    let connection: SQLiteConnection
    var state: State
    /// Whether the database's validation functions check documents other than design
    /// documents, once asked (see `Database.validateInWriter`).
    var validatesDocuments: Bool?

    init(connection: SQLiteConnection, sequence: Int) {
        self.connection = connection
        state = State(sequence: sequence)
    }

    var sequence: Int { state.sequence }

    func nextSequence() -> Int {
        state.sequence += 1
        return state.sequence
    }

    /// Adds this transaction's changes to the stored document counts, once, before it commits.
    func recordCounts() throws {
        let counts = state.counts
        // A statement for each count that moved, each a single seek (a commit's fixed cost
        // counts when it holds one `PUT`): one for the three, `WHERE key IN (...)`, built two
        // temporary tables every time.
        if counts.live != 0 {
            try connection.run("UPDATE metadata SET value = CAST(value AS INTEGER) + ? WHERE key = 'doc_count'",
                               [.int(counts.live)])
        }
        if counts.deleted != 0 {
            try connection.run("UPDATE metadata SET value = CAST(value AS INTEGER) + ? WHERE key = 'doc_del_count'",
                               [.int(counts.deleted)])
        }
        if counts.externalSize != 0 {
            try connection.run("UPDATE metadata SET value = CAST(value AS INTEGER) + ? WHERE key = 'external_size'",
                               [.int(counts.externalSize)])
        }
    }
}

/// How many documents are live and deleted, and the size of their winning bodies:
/// kept up to date by each write so `GET /db` never scans the documents.
struct DocumentCounts: Equatable {
    var live = 0
    var deleted = 0
    var externalSize = 0
}

extension DocumentCounts {
    mutating func count(_ isDeleted: Bool, by delta: Int) {
        if isDeleted { deleted += delta } else { live += delta }
    }
}
