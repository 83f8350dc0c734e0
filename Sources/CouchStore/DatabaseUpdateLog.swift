import CouchCore
import Foundation

/// The server-wide history behind `GET /_db_updates`, kept as CouchDB's `_global_changes`
/// database keeps it: one row per event type and database (`created:db`, `updated:db`,
/// `deleted:db`), moved to a new sequence each time that event happens again. A feed
/// reading rows after its `since` therefore sees each database's latest events once.
///
/// The rows live in `_db_updates.sqlite` in the data directory (not a `.couch` file, so
/// never listed as a database). As in CouchDB, the log is a convenience, not a ledger:
/// it is written without fsync (a crash may lose its last events, never a database's).
public final class DatabaseUpdateLog: @unchecked Sendable {
    public enum EventType: String, Sendable {
        case created, updated, deleted
    }

    public struct Event: Sendable, Equatable {
        public let sequence: Int
        public let database: String
        public let type: EventType
    }

    /// Told of every recorded event (`committed(sequence:)` carries the log's sequence).
    public let notifier = ChangeNotifier()
    private let lock = NSLock()
    private let connection: SQLiteConnection
    private var sequence: Int

    init(directory: String) throws(CouchError) {
        connection = try SQLiteConnection(path: directory + "/_db_updates.sqlite", create: true)
        try connection.execute("PRAGMA journal_mode=WAL")
        try connection.execute("PRAGMA synchronous=NORMAL")
        try connection.execute("""
            CREATE TABLE IF NOT EXISTS events (
                type TEXT NOT NULL, db TEXT NOT NULL, sequence INTEGER NOT NULL UNIQUE,
                PRIMARY KEY (type, db)) WITHOUT ROWID
            """)
        sequence = try connection.scalarInt("SELECT max(sequence) FROM events") ?? 0
    }

    /// Databases updated since the last write of the log, oldest first: `updated` events are
    /// written in batches, as CouchDB's `global_changes` buffers them (`max_write_delay`), so
    /// that a document write does not also pay a transaction of the log's.
    private var pendingUpdates: [DatabaseName] = []
    private var pendingSet: Set<DatabaseName> = []
    private var notifiedSequence = 0
    private static let batchDelay = DispatchTimeInterval.milliseconds(50)
    private let flushQueue = DispatchQueue(label: "couchette.db-updates")

    /// The sequence of the latest event.
    public var lastSequence: Int {
        lock.lock()
        defer { lock.unlock() }
        writePendingUpdates()
        return sequence
    }

    /// Records that `database` was created, updated or deleted; failures only lose the event.
    func record(_ type: EventType, _ database: DatabaseName) {
        lock.lock()
        if type == .updated {
            let first = pendingUpdates.isEmpty
            if pendingSet.insert(database).inserted { pendingUpdates.append(database) }
            lock.unlock()
            if first {
                // A reader may have written them first (it reads after pending events):
                // the feeds are told here in any case.
                flushQueue.asyncAfter(deadline: .now() + Self.batchDelay) { [self] in
                    lock.lock()
                    writePendingUpdates()
                    notifyNewEvents()
                }
            }
            return
        }
        writePendingUpdates()
        write([(type, database)])
        notifyNewEvents()
    }

    /// Writes the events still pending (a server stopping calls it last).
    public func flush() {
        lock.lock()
        writePendingUpdates()
        notifyNewEvents()
    }

    /// With the lock held, which it releases: tells the feeds of events written since last told.
    private func notifyNewEvents() {
        let last = sequence, isNew = last > notifiedSequence
        notifiedSequence = last
        lock.unlock()
        if isNew { notifier.post(.committed(sequence: last)) }
    }

    /// With the lock held: writes the pending `updated` events.
    private func writePendingUpdates() {
        guard !pendingUpdates.isEmpty else { return }
        let events = pendingUpdates.map { (EventType.updated, $0) }
        pendingUpdates.removeAll(keepingCapacity: true)
        pendingSet.removeAll(keepingCapacity: true)
        write(events)
    }

    /// With the lock held: writes `events` in one transaction, each at the next sequence.
    private func write(_ events: [(EventType, DatabaseName)]) {
        var next = sequence
        do {
            try connection.execute("BEGIN IMMEDIATE")
            for (type, database) in events {
                next += 1
                try connection.run("INSERT OR REPLACE INTO events (type, db, sequence) VALUES (?, ?, ?)",
                                   [.text(type.rawValue), .text(database.rawValue), .int(next)])
            }
            try connection.execute("COMMIT")
        } catch {
            try? connection.execute("ROLLBACK")
            return
        }
        sequence = next
    }

    /// Events after `since` in sequence order (or all, newest first, when `descending`).
    public func events(since: Int, limit: Int, descending: Bool) -> [Event] {
        lock.lock()
        defer { lock.unlock() }
        writePendingUpdates()
        var events: [Event] = []
        let sql = descending
            ? "SELECT sequence, db, type FROM events ORDER BY sequence DESC LIMIT ?"
            : "SELECT sequence, db, type FROM events WHERE sequence > ? ORDER BY sequence LIMIT ?"
        let arguments: [SQLiteValue] = descending ? [.int(limit)] : [.int(since), .int(limit)]
        try? connection.query(sql, arguments) { row in
            guard let type = EventType(rawValue: row.text(2)) else { return }
            events.append(Event(sequence: row.int(0), database: row.text(1), type: type))
        }
        return events
    }
}

import CSQLite

extension DatabaseManager {
    /// The SQLite library in use (`_node/_local/_versions`).
    public static var sqliteVersion: String { String(cString: sqlite3_libversion()) }
}
