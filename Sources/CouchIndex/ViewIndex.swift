import CouchCore
import CouchStore
import Foundation
import Logging

/// One index: the rows of every view of an `IndexDefinition`, in its own SQLite file
/// (`<database>.views/<signature>.sqlite`), brought up to date from the database's changes.
///
/// Layout: `rows(view, key, doc_id, dup, key_json, value)`, primary key `(view, key, doc_id,
/// dup)` without rowid, where `key` is the value's sort key in the view's collation
/// (`ViewCollation`: its byte order is CouchDB's collation, or the raw one) so ranges are
/// B-tree scans; `doc_id` ties are in raw byte order as CouchDB's; `dup` numbers several rows
/// one document emits with one key. An index on `doc_id` finds a document's rows when it
/// changes. `meta` holds the sequence and purge sequence indexed up to, and the database's
/// instance (a recreated database starts over).
///
/// The index is derived data: `synchronous=NORMAL` (a crash loses at most the last batches,
/// which are indexed again), and nothing here ever writes to the database.
public final class ViewIndex: @unchecked Sendable {
    public let definition: IndexDefinition
    public let path: String
    let writer: SQLiteConnection
    let updateLock = NSLock()
    let stateLock = NSLock()
    var indexedSequence = 0
    var indexedPurge = 0
    /// Rows in each view, as counted in the state given and carried by each batch written since
    /// (`carryTotals`): counting a million rows takes a tenth of a second, which every query
    /// after a write paid when a batch dropped them.
    var totals: [Int: (state: RowsState, rows: Int)] = [:]
    /// `offset`'s remembered counts, by view and direction.
    var offsetCounts: [Int: RememberedCounts<ViewRowBound>] = [:]
    private var idleReaders: [SQLiteConnection] = []
    var updating = false
    /// The seed of the stored reductions (`ReductionTree`), nil while they are not built;
    /// changed only with `updateLock` held.
    var reductionSeed: UInt64?
    /// Whether the last build of the stored reductions failed (updates then leave it to queries).
    var reductionBuildFailed = false
    static let logger = Logger(label: "couchette.views")

    static let schema = """
        CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE IF NOT EXISTS rows (view INTEGER NOT NULL, key BLOB NOT NULL, doc_id TEXT NOT NULL,
            dup INTEGER NOT NULL, key_json BLOB NOT NULL, value BLOB NOT NULL,
            PRIMARY KEY (view, key, doc_id, dup)) WITHOUT ROWID;
        CREATE INDEX IF NOT EXISTS rows_by_document ON rows (doc_id);
        """ + ReductionTree.schema

    /// Documents mapped per transaction: each core's share goes to a worker in one call, and
    /// every call is a round trip between processes (under load each costs a wait for the CPU).
    public static let batchSize = 2000

    init(definition: IndexDefinition, database: Database) throws(CouchError) {
        self.definition = definition
        let directory = database.indexDirectory
        try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        path = directory + "/" + definition.signature + ".sqlite"
        writer = try SQLiteConnection(path: path, create: true)
        try writer.execute("PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;" + Self.schema)
        let instance = try meta("instance")
        if instance != database.instanceStartTime {
            try transaction {
                try writer.run("DELETE FROM rows")
                try invalidateReductions()
                try setMeta("instance", database.instanceStartTime)
                try setMeta("update_seq", "0")
                try setMeta("purge_seq", String((try? database.purgeSequence) ?? 0))
            }
        }
        indexedSequence = Int(try meta("update_seq") ?? "0") ?? 0
        indexedPurge = Int(try meta("purge_seq") ?? "0") ?? 0
        reductionSeed = try Self.seed(meta("reductions"))
    }

    /// The database sequence the index has caught up with.
    public var updateSequence: Int { stateLock.withLock { indexedSequence } }
    public var purgeSequence: Int { stateLock.withLock { indexedPurge } }
    /// Whether an update is running now (`_info`'s `updater_running`).
    public var isUpdating: Bool { stateLock.withLock { updating } }

    /// The index's file size in bytes (with its write-ahead log).
    public var fileSize: Int {
        SQLiteConnection.fileSize(atPath: path) + SQLiteConnection.fileSize(atPath: path + "-wal")
    }

    /// The bytes of data (`sizes.active`): the pages in use, less the free space inside them
    /// as the last compaction measured it (CouchDB counts live data, not B-tree slack).
    public var activeSize: Int {
        (try? withReader { connection in
            let pages = try connection.scalarInt("PRAGMA page_count") ?? 0
            let free = try connection.scalarInt("PRAGMA freelist_count") ?? 0
            let size = try connection.scalarInt("PRAGMA page_size") ?? 0
            var slack = 0
            try connection.query("SELECT value FROM meta WHERE name = 'page_slack'") { slack = Int($0.text(0)) ?? 0 }
            return max(0, (pages - free) * size - slack)
        }) ?? 0
    }

    /// Rewrites the file without its free pages (`POST /db/_compact/ddoc`), the log emptied
    /// into it; updates wait. Then measures the slack inside the pages (`dbstat` reads every
    /// page, as `VACUUM` just did) for `activeSize`.
    public func compact() throws(CouchError) {
        updateLock.lock()
        defer { updateLock.unlock() }
        try writer.execute("VACUUM; PRAGMA wal_checkpoint(TRUNCATE);")
        guard let used = try? writer.scalarInt("SELECT coalesce(sum(pgsize - unused), 0) FROM dbstat"),
              let pages = try? writer.scalarInt("PRAGMA page_count"),
              let size = try? writer.scalarInt("PRAGMA page_size") else { return }
        try setMeta("page_slack", String(max(0, pages * size - used)))
    }

    // MARK: Storage

    func transaction(_ body: () throws -> Void) throws(CouchError) {
        do {
            try writer.run("BEGIN IMMEDIATE")
            do {
                try body()
                try writer.run("COMMIT")
            } catch {
                try? writer.run("ROLLBACK")
                throw error
            }
        } catch {
            throw error as? CouchError ?? CouchError.internalError("index write failed: \(error)")
        }
    }

    func meta(_ name: String) throws(CouchError) -> String? {
        var value: String?
        do {
            try writer.query("SELECT value FROM meta WHERE name = ?", [.text(name)]) { value = $0.text(0) }
        } catch {
            throw error as? CouchError ?? CouchError.internalError("index read failed")
        }
        return value
    }

    func setMeta(_ name: String, _ value: String) throws(CouchError) {
        try writer.run("INSERT OR REPLACE INTO meta (name, value) VALUES (?, ?)", [.text(name), .text(value)])
    }

    /// Runs `body` with a read connection (WAL: readers see the last committed batch).
    func withReader<T>(_ body: (SQLiteConnection) throws -> T) throws(CouchError) -> T {
        let connection: SQLiteConnection
        if let idle = stateLock.withLock({ idleReaders.popLast() }) {
            connection = idle
        } else {
            connection = try SQLiteConnection(path: path)
            try connection.execute("PRAGMA query_only=1")
        }
        defer { stateLock.withLock { if idleReaders.count < 8 { idleReaders.append(connection) } } }
        do {
            return try body(connection)
        } catch {
            throw error as? CouchError ?? CouchError.internalError("index read failed: \(error)")
        }
    }

    /// The key as stored: its sort key in the view's collation, led in a partitioned index
    /// by the partition's.
    func storedKey(_ key: JSONValue, id: DocumentID, view: Int) -> [UInt8] {
        let sortKey = definition.collation(view).sortKey(key)
        guard definition.partitioned else { return sortKey }
        return ViewRange.partitionPrefix(id.partition ?? "") + sortKey
    }

    /// Rows in `view`, as the last committed batch left them.
    public func totalRows(view: Int) throws(CouchError) -> Int {
        try withReader { connection in
            // The state and the count read in one snapshot.
            try connection.run("BEGIN")
            defer { try? connection.run("COMMIT") }
            let state = try Self.rowsState(connection)
            if let total = stateLock.withLock({ totals[view] }), total.state == state { return total.rows }
            let rows = try connection.scalarInt("SELECT count(*) FROM rows WHERE view = ?", [.int(view)]) ?? 0
            // Kept unless a batch has carried a count past this snapshot meanwhile.
            stateLock.withLock {
                let ahead = totals[view].map { $0.state.sequence > state.sequence || $0.state.purges > state.purges } ?? false
                if !ahead { totals[view] = (state, rows) }
            }
            return rows
        }
    }

    /// Moves the views' row counts made in `previous` to `next`, a batch's or a purge's
    /// `changes` (rows added less rows removed, by view) applied; counts made in another state
    /// are dropped. Called with `stateLock` held, once the batch is committed.
    func carryTotals(from previous: RowsState, to next: RowsState, by changes: [Int: Int]) {
        for (view, total) in totals {
            totals[view] = total.state == previous ? (next, total.rows + changes[view, default: 0]) : nil
        }
    }
}
