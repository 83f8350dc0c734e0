import CouchCore
import CouchStore
import Foundation
import Logging

/// One index: the rows of every view of an `IndexDefinition`, in its own SQLite file
/// (`<database>.views/<signature>.sqlite`), brought up to date from the database's changes.
///
/// Layout: `rows(view, key, doc_id, dup, key_json, value)`, primary key `(view, key, doc_id,
/// dup)` without rowid, where `key` is the value's `Collation.sortKey` (its byte order is
/// CouchDB's collation) so ranges are B-tree scans; `doc_id` ties are in raw byte order as
/// CouchDB's; `dup` numbers several rows one document emits with one key. An index on
/// `doc_id` finds a document's rows when it changes. `meta` holds the sequence and purge
/// sequence indexed up to, and the database's instance (a recreated database starts over).
///
/// The index is derived data: `synchronous=NORMAL` (a crash loses at most the last batches,
/// which are indexed again), and nothing here ever writes to the database.
public final class ViewIndex: @unchecked Sendable {
    public let definition: IndexDefinition
    public let path: String
    let writer: SQLiteConnection
    let updateLock = NSLock()
    private let stateLock = NSLock()
    private var indexedSequence = 0
    private var indexedPurge = 0
    private var totals: [Int: Int] = [:]
    private var idleReaders: [SQLiteConnection] = []
    private var updating = false
    /// The seed of the stored reductions (`ReductionTree`), nil while they are not built;
    /// changed only with `updateLock` held.
    var reductionSeed: UInt64?
    static let logger = Logger(label: "couchette.views")

    static let schema = """
        CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE IF NOT EXISTS rows (view INTEGER NOT NULL, key BLOB NOT NULL, doc_id TEXT NOT NULL,
            dup INTEGER NOT NULL, key_json BLOB NOT NULL, value BLOB NOT NULL,
            PRIMARY KEY (view, key, doc_id, dup)) WITHOUT ROWID;
        CREATE INDEX IF NOT EXISTS rows_by_document ON rows (doc_id);
        """ + ReductionTree.schema

    /// Documents mapped per transaction.
    public static let batchSize = 1000

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
        ["", "-wal"].reduce(0) { total, suffix in
            total + ((try? FileManager.default.attributesOfItem(atPath: path + suffix)[.size] as? Int) ?? 0)
        }
    }

    // MARK: Updating

    /// Brings the index up to the database's current sequence: purged documents' rows
    /// removed, then changed documents mapped in batches, each batch written in one
    /// transaction. Concurrent callers wait for one update rather than run two.
    public func update(from database: Database) throws(CouchError) {
        let target = database.updateSequence
        if updateSequence >= target, ((try? database.purgeSequence) ?? 0) <= purgeSequence { return }
        updateLock.lock()
        stateLock.withLock { updating = true }
        defer {
            stateLock.withLock { updating = false }
            updateLock.unlock()
        }
        try applyPurges(database)
        var since = updateSequence
        // Catching up on many changes costs less as one build of the stored reductions from
        // the rows than as node updates (a changed row costs a leaf's worth of reads).
        if reductionSeed != nil, target - since > max(Self.batchSize, try reducedRows() / 32) {
            try transaction { try invalidateReductions() }
        }
        while since < target {
            let changes: [ChangeRow]
            do {
                changes = try database.changes(ChangesQuery(since: since, limit: Self.batchSize, includeTree: true,
                                                            includeBodies: true))
            } catch {
                throw error as? CouchError ?? CouchError.internalError("cannot read changes")
            }
            guard let last = changes.last else { break }
            // Design documents are not in views (CouchDB's `include_design` option puts them in).
            let inputs = changes.filter { !$0.isDeleted && (definition.includeDesign || !$0.id.isDesign) }.map { Self.mapInput($0, localSequence: definition.includeLocalSequence) }
            let emitted = try mapInParallel(inputs)
            var byDocument: [String: [[Emission]]] = [:]
            for (input, rows) in zip(inputs, emitted) { byDocument[input.id.rawValue] = rows }
            try transaction {
                var changed = RowChanges(trees: reductionSeed.map(trees) ?? [])
                for change in changes {
                    try deleteRows(of: change.id.rawValue, into: &changed)
                    guard let views = byDocument[change.id.rawValue] else { continue }
                    for (view, rows) in views.enumerated() {
                        for (dup, row) in rows.enumerated() {
                            let key = storedKey(row.key, id: change.id)
                            try writer.run(
                                "INSERT INTO rows (view, key, doc_id, dup, key_json, value) VALUES (?, ?, ?, ?, ?, ?)",
                                [.int(view), .blob(key), .text(change.id.rawValue), .int(dup),
                                 .blob(row.key.serialized()), .blob(row.value.serialized())])
                            changed.add(view: view, key: key, docID: change.id.rawValue, dup: dup)
                        }
                    }
                }
                try updateReductions(changed)
                try setMeta("update_seq", String(last.sequence))
            }
            since = last.sequence
            stateLock.withLock {
                indexedSequence = since
                totals.removeAll()
            }
        }
        if reductionSeed == nil, !reducingViews.isEmpty {
            // The rows are indexed whatever happens here: a reduce query builds them again, or says why not.
            do {
                try rebuildReductions()
            } catch {
                Self.logger.warning("stored reductions of \(path) not built: \(error.reason)")
            }
        }
    }

    /// Removes the rows of documents purged since the index last looked; documents that
    /// keep revisions moved to a new sequence and are mapped again by the update. When the
    /// database no longer lists every purge the index missed, the index starts over.
    private func applyPurges(_ database: Database) throws(CouchError) {
        let databasePurge: Int
        let infos: [(sequence: Int, id: String, revisions: [String])]
        do {
            databasePurge = try database.purgeSequence
            guard databasePurge > purgeSequence else { return }
            infos = try database.purgedInfos().filter { $0.sequence > purgeSequence }
        } catch {
            throw error as? CouchError ?? CouchError.internalError("cannot read purges")
        }
        let complete = infos.first.map { $0.sequence == purgeSequence + 1 } ?? false
        try transaction {
            if complete {
                var changed = RowChanges(trees: reductionSeed.map(trees) ?? [])
                for info in infos { try deleteRows(of: info.id, into: &changed) }
                try updateReductions(changed)
            } else {
                try writer.run("DELETE FROM rows")
                try invalidateReductions()
                try setMeta("update_seq", "0")
            }
            try setMeta("purge_seq", String(databasePurge))
        }
        stateLock.withLock {
            if !complete { indexedSequence = 0 }
            indexedPurge = databasePurge
            totals.removeAll()
        }
    }

    /// Maps a batch over the available cores: the mapper is called on slices at once.
    private func mapInParallel(_ inputs: [MapInput]) throws(CouchError) -> [[[Emission]]] {
        guard !inputs.isEmpty else { return [] }
        let mapper = definition.mapper
        let slices = inputs.transformInParallelSlices(minimumSlice: 100) { slice -> Result<[[[Emission]]], CouchError> in
            do {
                return .success(try mapper.map(Array(slice)))
            } catch {
                return .failure(error as? CouchError ?? CouchError.internalError("map failed: \(error)"))
            }
        }
        var all: [[[Emission]]] = []
        all.reserveCapacity(inputs.count)
        for slice in slices { all += try slice.get() }
        guard all.count == inputs.count else { throw CouchError.internalError("mapper answered \(all.count) of \(inputs.count) documents") }
        return all
    }

    /// A changed document as map functions see it: `_id`, `_rev`, its members,
    /// `_attachments` stubs, `_conflicts` (and `_local_seq` when asked), spliced from the
    /// stored bytes.
    static func mapInput(_ change: ChangeRow, localSequence: Bool = false) -> MapInput {
        var bytes: [UInt8] = Array("{\"_id\":".utf8)
        bytes.reserveCapacity((change.body?.count ?? 2) + 96)
        JSONWriter.appendString(change.id.rawValue, to: &bytes)
        bytes += Array(",\"_rev\":\"\(change.winner.description)\"".utf8)
        if let body = change.body, body.count > 2, body.first == UInt8(ascii: "{") {
            bytes.append(UInt8(ascii: ","))
            bytes += body.dropFirst().dropLast()
        }
        if !change.attachments.isEmpty {
            bytes += Array(",\"_attachments\":{".utf8)
            for (index, attachment) in change.attachments.enumerated() {
                if index > 0 { bytes.append(UInt8(ascii: ",")) }
                JSONWriter.appendString(attachment.name, to: &bytes)
                bytes += Array(":{\"content_type\":".utf8)
                JSONWriter.appendString(attachment.contentType, to: &bytes)
                bytes += Array(",\"revpos\":\(attachment.revpos),\"digest\":\"\(attachment.digest)\",\"length\":\(attachment.length),\"stub\":true}".utf8)
            }
            bytes.append(UInt8(ascii: "}"))
        }
        if let conflicts = change.tree?.conflicts.filter({ $0 != change.winner }), !conflicts.isEmpty {
            bytes += Array(",\"_conflicts\":[".utf8)
            bytes += Array(conflicts.map { "\"\($0.description)\"" }.joined(separator: ",").utf8)
            bytes.append(UInt8(ascii: "]"))
        }
        if localSequence { bytes += Array(",\"_local_seq\":\(change.sequence)".utf8) }
        bytes.append(UInt8(ascii: "}"))
        return MapInput(id: change.id, json: bytes)
    }

    /// Rewrites the file without its free pages (`POST /db/_compact/ddoc`); updates wait.
    public func compact() throws(CouchError) {
        updateLock.lock()
        defer { updateLock.unlock() }
        try writer.execute("VACUUM")
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

    /// Rows in `view` (cached until the next batch).
    /// The key as stored: its sort key, led in a partitioned index by the partition's.
    private func storedKey(_ key: JSONValue, id: DocumentID) -> [UInt8] {
        guard definition.partitioned else { return Collation.sortKey(key) }
        return ViewRange.partitionPrefix(id.partition ?? "") + Collation.sortKey(key)
    }

    public func totalRows(view: Int) throws(CouchError) -> Int {
        if let total = stateLock.withLock({ totals[view] }) { return total }
        let total = try withReader { try $0.scalarInt("SELECT count(*) FROM rows WHERE view = ?", [.int(view)]) ?? 0 }
        stateLock.withLock { totals[view] = total }
        return total
    }
}
