import CouchCore
import Foundation
import Logging

/// One CouchDB database: a SQLite file with one row per document. Writes go through
/// the group-committing `WriteQueue`; reads use their own connections.
public final class Database: @unchecked Sendable {
    public let name: DatabaseName
    public let path: String
    /// Constant for the life of the database (its creation time); CouchDB's replicator
    /// compares it between `GET /db` and `_ensure_full_commit`.
    public let instanceStartTime: String
    public let notifier = ChangeNotifier()
    /// `pendingChanges`' counts and `_all_docs`' offsets, for clients paging through them.
    let pendingCounts = RememberedCounts<Int>()
    let ascendingOffsets = RememberedCounts<OrderedID>()
    let descendingOffsets = RememberedCounts<OrderedID>()
    let writer: WriteQueue
    let readers: ReaderPool
    public let attachments: AttachmentStore
    let settingsLock = NSLock()
    private var cachedRevsLimit: Int
    /// The security object as last read or written (`.some(nil)`: none set), so
    /// authorization does not read it from disk on every request.
    var cachedSecurityObject: JSONObject??
    private let compactionLock = NSLock()
    private var compacting = false
    /// Checks every revision before it is written, interactive and replicated alike; set
    /// by the `DatabaseManager` from its own.
    public var validator: DocumentValidator? {
        get { settingsLock.withLock { installedValidator } }
        set { settingsLock.withLock { installedValidator = newValue } }
    }
    private var installedValidator: DocumentValidator?
    private var designWrites = 0
    /// Created with `partitioned: true`: document IDs are `partition:id` (see `Database+Partitions`).
    public let isPartitioned: Bool
    /// `[couchdb] max_partition_size` (bytes of live bodies); 0: no limit. Set by the `DatabaseManager`.
    public var maximumPartitionSize: Int {
        get { settingsLock.withLock { partitionSizeLimit } }
        set { settingsLock.withLock { partitionSizeLimit = newValue } }
    }
    private var partitionSizeLimit = 0

    public static let defaultRevsLimit = 1000
    static let logger = Logger(label: "couchette.store")

    init(name: DatabaseName, path: String, create: Bool, partitioned: Bool = false) throws(CouchError) {
        self.name = name
        self.path = path
        let connection = try SQLiteConnection(path: path, create: create)
        try DatabaseSchema.configure(connection)
        try DatabaseSchema.migrate(connection)
        if create {
            let now = Int(Date().timeIntervalSince1970 * 1_000_000)
            try connection.run("INSERT OR IGNORE INTO metadata (key, value) VALUES ('instance_start_time', ?)", [.text(String(now))])
            // Written before the database is visible to anyone, so no write can precede it.
            if partitioned { try connection.run("INSERT OR REPLACE INTO metadata (key, value) VALUES ('partitioned', 'true')") }
        }
        isPartitioned = (try? connection.scalarInt("SELECT count(*) FROM metadata WHERE key = 'partitioned' AND value = 'true'")) == 1
        var startTime = "0"
        try? connection.query("SELECT value FROM metadata WHERE key = 'instance_start_time'") { startTime = $0.text(0) }
        instanceStartTime = startTime
        var revsLimit = Database.defaultRevsLimit
        try? connection.query("SELECT value FROM metadata WHERE key = 'revs_limit'") { revsLimit = Int($0.text(0)) ?? revsLimit }
        cachedRevsLimit = revsLimit
        let sequence = try connection.scalarInt("SELECT max(sequence) FROM documents") ?? 0
        let attachments = try AttachmentStore(directory: Database.attachmentDirectory(for: path))
        // Blobs of writes a crash cut short, before any write can stage new ones.
        let swept = attachments.sweep { keys in try Database.referencedKeys(keys, connection) }
        if swept > 0 { Database.logger.notice("removed \(swept) attachment bodies of unfinished writes from \(name.rawValue)") }
        self.attachments = attachments
        writer = WriteQueue(connection: connection, committedSequence: sequence) { () throws(CouchError) in
            let connection = try SQLiteConnection(path: path)
            try DatabaseSchema.configure(connection)
            return connection
        }
        let writer = self.writer
        readers = ReaderPool(path: path, commits: { writer.commitCount })
        writer.readers = readers
        let notifier = self.notifier
        writer.onCommit = { sequence in notifier.post(.committed(sequence: sequence)) }
    }

    /// Closes the connections of a database unused for `seconds` (its writer's and its idle
    /// readers'): an idle open database then holds no file descriptor, and the next read or
    /// write opens what it needs. Called periodically by the `DatabaseManager`. Whether it
    /// closed any.
    func closeConnectionsIfIdle(for seconds: Double) -> Bool {
        let readersClosed = readers.closeIfIdle(for: seconds)
        return writer.closeIfIdle(for: seconds) || readersClosed
    }

    static func attachmentDirectory(for path: String) -> String {
        String(path.dropLast(DatabaseManager.fileExtension.count)) + ".attachments"
    }

    /// Where derived indexes of this database (views, Mango indexes) keep their files; removed
    /// with the database.
    public var indexDirectory: String { Self.indexDirectory(for: path) }

    static func indexDirectory(for path: String) -> String {
        String(path.dropLast(DatabaseManager.fileExtension.count)) + ".views"
    }

    /// Changes whenever a design document may have been written (before and after its
    /// commit), so that what is derived from the design documents can tell it is stale.
    public var designGeneration: Int { settingsLock.withLock { designWrites } }

    /// Called before and after a write or purge; `touchesDesign`: whether it names a design document.
    func noteDesignWrite(_ touchesDesign: Bool) {
        guard touchesDesign else { return }
        settingsLock.withLock { designWrites &+= 1 }
    }

    /// The last committed sequence.
    public var updateSequence: Int { writer.committedSequence }

    public var revsLimit: Int {
        settingsLock.lock()
        defer { settingsLock.unlock() }
        return cachedRevsLimit
    }

    public func setRevsLimit(_ limit: Int) throws {
        guard limit > 0 else { throw CouchError.badRequest("revs_limit must be a positive integer") }
        try writer.perform { transaction in
            try transaction.connection.run("INSERT OR REPLACE INTO metadata (key, value) VALUES ('revs_limit', ?)", [.text(String(limit))])
        }
        settingsLock.lock()
        cachedRevsLimit = limit
        settingsLock.unlock()
    }

    public var isCompacting: Bool {
        compactionLock.lock()
        defer { compactionLock.unlock() }
        return compacting
    }

    func setCompacting(_ value: Bool) -> Bool {
        compactionLock.lock()
        defer { compactionLock.unlock() }
        if value && compacting { return false }
        compacting = value
        return true
    }

    /// The counts every write keeps in `metadata`.
    static func documentCounts(_ connection: SQLiteConnection) throws -> DocumentCounts {
        var counts = DocumentCounts()
        try connection.query(
            "SELECT key, CAST(value AS INTEGER) FROM metadata WHERE key IN ('doc_count', 'doc_del_count', 'external_size')"
        ) { row in
            switch row.text(0) {
            case "doc_count": counts.live = row.int(1)
            case "doc_del_count": counts.deleted = row.int(1)
            default: counts.externalSize = row.int(1)
            }
        }
        return counts
    }

    public func info() throws -> DatabaseInfo {
        try readers.withConnection { connection in
            let counts = try Self.documentCounts(connection)
            let pageCount = try connection.scalarInt("PRAGMA page_count") ?? 0
            let pageSize = try connection.scalarInt("PRAGMA page_size") ?? 4096
            let freePages = try connection.scalarInt("PRAGMA freelist_count") ?? 0
            let walSize = SQLiteConnection.fileSize(atPath: path + "-wal")
            // In-page free space as measured at the last compaction (`recordPageSlack`).
            let slack = (try? connection.scalarInt("SELECT CAST(value AS INTEGER) FROM metadata WHERE key = 'page_slack'")) ?? 0
            return DatabaseInfo(
                name: name, documentCount: counts.live, deletedDocumentCount: counts.deleted,
                updateSequence: updateSequence,
                fileSize: pageCount * pageSize + walSize,
                activeSize: max(0, (pageCount - freePages) * pageSize - slack),
                externalSize: counts.externalSize,
                instanceStartTime: instanceStartTime,
                compactRunning: isCompacting)
        }
    }
}

