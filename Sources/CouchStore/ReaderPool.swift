import CouchCore
import Foundation

/// Read connections of one database. WAL lets them read while the writer writes;
/// each is used by one thread at a time and returned after the read.
///
/// A connection stays inside its read transaction between uses, and is lent with it again as
/// long as no transaction has committed since it began (`commits`, counted by the writer before
/// any write is acknowledged): its snapshot is then the one a new transaction would see. Beginning
/// and ending a read transaction takes the log's shared-memory locks, which every reader of the
/// database contends for: with ten clients reading, more than one futex wait per `GET`.
///
/// A kept snapshot must not hold the log back: stale ones are ended before each checkpoint
/// (`endStaleSnapshots`), and operations that need every reader gone run under `withoutSnapshots`.
/// The pool's connections also run the checkpoints the writer leaves beside it (`checkpoint`).
final class ReaderPool: @unchecked Sendable {
    /// A lent connection and the commit count its transaction has seen (nil: none open).
    final class Reader {
        let connection: SQLiteConnection
        fileprivate var commitsSeen: Int?
        fileprivate init(_ connection: SQLiteConnection) { self.connection = connection }
    }

    private let path: String
    private let commits: () -> Int
    private let lock = NSLock()
    private var idle: [Reader] = []
    private let maximumIdle = 16
    private static let mappedBytes = 1 << 30
    private var lastUse = DispatchTime.now().uptimeNanoseconds
    /// While positive, connections come back without a transaction (see `withoutSnapshots`).
    private var snapshotsSuspended = 0

    /// `commits`: transactions committed to the database so far, read at each lending.
    init(path: String, commits: @escaping () -> Int) {
        self.path = path
        self.commits = commits
    }

    /// Runs `body` on a connection inside a read transaction that sees every commit made before the call.
    func withConnection<T>(_ body: (SQLiteConnection) throws -> T) throws -> T {
        try withReader { try body($0.connection) }
    }

    func withReader<T>(_ body: (Reader) throws -> T) throws -> T {
        let reader = try checkOut()
        try refresh(reader)  // a connection that fails this is dropped
        defer { checkIn(reader) }
        return try body(reader)
    }

    /// Brings `reader`'s snapshot up to date: a new transaction if one has committed since it began.
    func refresh(_ reader: Reader) throws {
        let current = commits()
        let connection = reader.connection
        if reader.commitsSeen == current, !connection.isAutocommit { return }
        reader.commitsSeen = nil
        if !connection.isAutocommit { try connection.run("COMMIT") }
        // Deferred: the snapshot is taken by the first read, after `current` was counted.
        try connection.run("BEGIN")
        reader.commitsSeen = current
    }

    private func checkOut() throws(CouchError) -> Reader {
        lock.lock()
        if let reader = idle.popLast() {
            lock.unlock()
            return reader
        }
        lock.unlock()
        let connection = try SQLiteConnection(path: path)
        try connection.execute("PRAGMA query_only=1")
        // Pages read through a mapping rather than a pread and a copy each: scans (_changes,
        // _all_docs) spent a third of their time in those calls. The mapping goes with the
        // connection when the database idles.
        try connection.execute("PRAGMA mmap_size=\(Self.mappedBytes)")
        return Reader(connection)
    }

    private func checkIn(_ reader: Reader) {
        lock.lock()
        defer { lock.unlock() }
        lastUse = DispatchTime.now().uptimeNanoseconds
        if snapshotsSuspended > 0 || reader.commitsSeen != commits() { Self.end(reader) }
        if idle.count < maximumIdle { idle.append(reader) }
    }

    private static func end(_ reader: Reader) {
        reader.commitsSeen = nil
        if !reader.connection.isAutocommit { try? reader.connection.run("COMMIT") }
    }

    /// Ends the transactions of idle connections that have missed a commit: a checkpoint cannot
    /// copy the log into the database past the oldest snapshot still held.
    func endStaleSnapshots() {
        lock.withLock {
            let current = commits()
            for reader in idle where reader.commitsSeen != current { Self.end(reader) }
        }
    }

    /// A passive checkpoint on one of the pool's connections (see `SQLiteConnection.checkpoint`),
    /// after ending the stale snapshots that would stop it short. After it, the idle
    /// connections' snapshots are ended too: one begun before the checkpoint finished keeps a
    /// place in the log, and the next write can start the log again from its beginning only
    /// when no reader holds one (those begun from now on read the database file).
    func checkpoint() {
        endStaleSnapshots()
        guard let reader = try? checkOut() else { return }
        Self.end(reader)
        // A new connection opens the log with its first read.
        if (try? reader.connection.execute("SELECT 1 FROM sqlite_master LIMIT 1")) != nil {
            reader.connection.checkpoint()
        }
        lock.withLock { idle.forEach(Self.end) }
        checkIn(reader)
    }

    /// Runs `operation` (a `VACUUM`, a truncating checkpoint) with no idle connection holding a
    /// snapshot, and none kept by connections returned meanwhile.
    func withoutSnapshots<T>(_ operation: () throws -> T) rethrows -> T {
        lock.withLock {
            snapshotsSuspended += 1
            idle.forEach(Self.end)
        }
        defer { lock.withLock { snapshotsSuspended -= 1 } }
        return try operation()
    }

    /// Closes the idle connections, giving back their page caches (each up to SQLite's default
    /// 2 MB) and their file mappings; the next read opens one again.
    func releaseCacheMemory() {
        _ = lock.withLock { takeIdle() }  // closed here, outside the lock
    }

    /// Closes the idle connections if none was used for `seconds`: an idle database holds
    /// no descriptor (the next read opens one). Whether it closed any.
    @discardableResult
    func closeIfIdle(for seconds: Double) -> Bool {
        let closed: [Reader] = lock.withLock {
            guard DispatchTime.now().uptimeNanoseconds &- lastUse > UInt64(seconds * 1e9) else { return [] }
            return takeIdle()
        }
        return !closed.isEmpty   // closed here, outside the lock
    }

    /// The idle connections, no longer in the pool. Called under the lock.
    private func takeIdle() -> [Reader] {
        defer { idle.removeAll() }
        return idle
    }
}
