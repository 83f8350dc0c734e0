import CSQLite
import CouchCore
import Foundation
import Logging

/// A SQLite connection used by one thread at a time. Errors become
/// `internal_server_error` at this boundary; the details go to the log, never to clients.
/// Public for the other stores of derived data (`CouchIndex`'s view indexes).
public final class SQLiteConnection {
    private var handle: OpaquePointer?
    private var statements: [String: SQLiteStatement] = [:]
    /// The statements used last, looked at before `statements`: the same SQL literal compares
    /// equal at once (its address), where the dictionary hashed the whole text each time (a
    /// third of a new document's statement lookups, two a document in a bulk write).
    private var recent: [(sql: String, statement: SQLiteStatement)] = []
    private var nextRecent = 0
    private static let recentCount = 8
    let path: String
    static let logger = Logger(label: "couchette.sqlite")

    /// Every write of a batch runs in its own savepoint, whose journal holds the original of
    /// each page the write changes. SQLite spills that journal to a temporary file past 64 KiB
    /// and then writes it there for the rest of the transaction: a 1,000-document `_bulk_docs`
    /// paid ~3,400 `pwrite`s of it (14 MB). Held in memory always (`-1`), it costs what the
    /// write's own pages cost (a few for a document; a document's size at worst, whose body is
    /// in memory anyway) and is emptied at each release. A threshold is no middle way: SQLite
    /// allocates all of it for every journal (4 MiB were mapped and unmapped for each write,
    /// and at 128 KiB `_bulk_docs` spilled again; server CPU per document 20 µs against 24).
    ///
    /// Page caches grow page by page rather than starting with room for 20: a connection costs
    /// 68 KB instead of 137 once it has read its schema, which counts when a thousand
    /// replication targets each hold one.
    ///
    /// SQLite keeps no count of its memory: the count's lock, around every allocation, was
    /// contended by every thread reading.
    private static let processWideSettings: Void = {
        _ = couchette_sqlite3_set_statement_journal_spill(-1)
        _ = couchette_sqlite3_allocate_pages_as_read()
        _ = couchette_sqlite3_count_no_memory()
    }()

    public init(path: String, readOnly: Bool = false, create: Bool = false) throws(CouchError) {
        Self.processWideSettings
        self.path = path
        var flags = SQLITE_OPEN_NOMUTEX | (readOnly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE)
        if create { flags |= SQLITE_OPEN_CREATE }
        let code = sqlite3_open_v2(path, &handle, flags, nil)
        guard code == SQLITE_OK else {
            let message = handle.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory"
            sqlite3_close_v2(handle)
            handle = nil
            throw SQLiteConnection.failure("open \(path)", code: code, message: message)
        }
        sqlite3_busy_timeout(handle, 10_000)
        sqlite3_extended_result_codes(handle, 1)
        // The database's last connection to close leaves the write-ahead log as it is rather
        // than copy it into the database file and delete it: the log is as durable as the file,
        // it is checkpointed as it grows (`WriteQueue.checkpointIfDue`), and the next open finds it.
        // Checkpointing at close made a thousand databases closing together (idle, or evicted
        // past max_dbs_open) a burst of writes and syncs that held other databases' commits
        // for seconds, and every reopen created the log and its index again.
        _ = couchette_sqlite3_keep_log_on_close(handle, 1)
    }

    deinit {
        statements.values.forEach { $0.finalize() }
        sqlite3_close_v2(handle)
    }

    static func failure(_ context: String, code: Int32, message: String, systemErrno: Int32 = 0,
                        path: String? = nil) -> CouchError {
        logger.error("sqlite: \(context) failed (\(code), errno \(systemErrno)): \(message)")
        // A full disk (SQLITE_FULL, or a write error while the disk or the file size limit
        // is exhausted: SQLite does not keep the cause) is the client's to know about: 507,
        // and the write left nothing.
        if code & 0xff == SQLITE_FULL { return CouchError.storageFull }
        if code & 0xff == SQLITE_IOERR {
            if let path, StorageSpace.isExhausted(for: path) { return CouchError.storageFull }
            return CouchError.writeFailed(errno: systemErrno, "storage error")
        }
        return CouchError.internalError("storage error")
    }

    var systemErrno: Int32 { sqlite3_system_errno(handle) }

    /// A file's size in bytes (a database's, its log's), 0 when it is absent. `stat` itself:
    /// Foundation's `attributesOfItem` also looks the owner up in /etc/passwd and /etc/group,
    /// for every `GET /db`.
    public static func fileSize(atPath path: String) -> Int {
        var status = stat()
        return stat(path, &status) == 0 ? Int(status.st_size) : 0
    }

    /// Pages in the write-ahead log at the last commit (see `deferCheckpoints`).
    private(set) var walPages: Int32 = 0
    /// SQLite's usual threshold for a checkpoint: 1,000 pages, 4 MiB.
    static let checkpointPages: Int32 = 1000

    /// Replaces SQLite's automatic checkpoint, which runs inside `COMMIT` and whose failure
    /// (a full disk) `COMMIT` then reports although the transaction did commit: a write
    /// would be answered as failed yet be there. Checkpoints run after the commit instead
    /// (`WriteQueue`), where a failure concerns no write.
    func deferCheckpoints() {
        sqlite3_wal_hook(handle, { context, _, _, pages in
            guard let context else { return SQLITE_OK }
            Unmanaged<SQLiteConnection>.fromOpaque(context).takeUnretainedValue().walPages = pages
            return SQLITE_OK
        }, Unmanaged.passUnretained(self).toOpaque())
    }

    /// Copies the log's committed pages into the database, as far as the oldest snapshot still
    /// read allows, without waiting for the writer or holding it back (a passive checkpoint).
    /// Outside a transaction, on a connection that has read the database (one that has not
    /// yet opened the log copies nothing). A failure is logged: the log keeps the commits, and
    /// the next checkpoint tries again. One that finds another checkpoint running gives way.
    func checkpoint() {
        let code = sqlite3_wal_checkpoint_v2(handle, nil, SQLITE_CHECKPOINT_PASSIVE, nil, nil)
        if code != SQLITE_OK, code & 0xff != SQLITE_BUSY {
            Self.logger.warning("sqlite: checkpoint of \(path) failed (\(code), errno \(systemErrno)): \(lastErrorMessage)")
        }
    }

    /// True when no transaction is open: after some errors (a full disk, an I/O error)
    /// SQLite rolls the whole transaction back by itself.
    var isAutocommit: Bool { sqlite3_get_autocommit(handle) != 0 }

    var lastErrorMessage: String { String(cString: sqlite3_errmsg(handle)) }

    public func execute(_ sql: String) throws(CouchError) {
        var error: UnsafeMutablePointer<CChar>?
        let code = sqlite3_exec(handle, sql, nil, nil, &error)
        if code != SQLITE_OK {
            let message = error.map { String(cString: $0) } ?? lastErrorMessage
            sqlite3_free(error)
            throw SQLiteConnection.failure(sql, code: code, message: message, systemErrno: systemErrno, path: path)
        }
    }

    /// A prepared statement, cached for the life of the connection. Each use resets it after
    /// itself; one a use left mid-scan (it threw) is reset here, before it is used again.
    func statement(_ sql: String) throws(CouchError) -> SQLiteStatement {
        for index in recent.indices where recent[index].sql == sql {
            let cached = recent[index].statement
            cached.resetIfBusy()
            return cached
        }
        if let cached = statements[sql] {
            cached.resetIfBusy()
            remember(sql, cached)
            return cached
        }
        var pointer: OpaquePointer?
        let code = sqlite3_prepare_v3(handle, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &pointer, nil)
        guard code == SQLITE_OK, let pointer else {
            throw SQLiteConnection.failure("prepare \(sql)", code: code, message: lastErrorMessage)
        }
        let statement = SQLiteStatement(pointer, connection: self)
        statements[sql] = statement
        remember(sql, statement)
        return statement
    }

    private func remember(_ sql: String, _ statement: SQLiteStatement) {
        if recent.count < Self.recentCount {
            recent.append((sql, statement))
        } else {
            recent[nextRecent] = (sql, statement)
            nextRecent = (nextRecent + 1) % Self.recentCount
        }
    }

    /// Runs `body` for every row of a query.
    public func query(_ sql: String, _ arguments: [SQLiteValue] = [], row body: (SQLiteStatement) throws -> Void) throws {
        let statement = try statement(sql)
        // Reset even when `body` throws: a statement left mid-scan would hold its read transaction.
        defer { statement.reset() }
        try statement.bind(arguments)
        while try statement.step() {
            try body(statement)
        }
    }

    /// Runs a statement that returns no rows; prepared once and cached, so transaction
    /// control on hot paths (`BEGIN`, `SAVEPOINT`, `COMMIT`) is not parsed every time.
    public func run(_ sql: String, _ arguments: [SQLiteValue] = []) throws(CouchError) {
        let statement = try statement(sql)
        try statement.bind(arguments)
        while try statement.step() {}
        statement.reset()
    }

    public func scalarInt(_ sql: String, _ arguments: [SQLiteValue] = []) throws(CouchError) -> Int? {
        let statement = try statement(sql)
        try statement.bind(arguments)
        defer { statement.reset() }
        guard try statement.step(), !statement.isNull(0) else { return nil }
        return statement.int(0)
    }

    public var changes: Int { Int(sqlite3_changes(handle)) }
}

public enum SQLiteValue {
    case int(Int)
    case text(String)
    case blob([UInt8])
    case null

    /// The size of a blob or text value.
    public var byteCount: Int {
        switch self {
        case .blob(let bytes): bytes.count
        case .text(let text): text.utf8.count
        case .int, .null: 0
        }
    }
}

public final class SQLiteStatement {
    private let pointer: OpaquePointer
    private unowned let connection: SQLiteConnection

    init(_ pointer: OpaquePointer, connection: SQLiteConnection) {
        self.pointer = pointer
        self.connection = connection
    }

    func finalize() { sqlite3_finalize(pointer) }
    func reset() {
        sqlite3_reset(pointer)
        sqlite3_clear_bindings(pointer)
    }

    func resetIfBusy() {
        if sqlite3_stmt_busy(pointer) != 0 { reset() }
    }

    private static let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

    public func bind(_ values: [SQLiteValue]) throws(CouchError) {
        for (offset, value) in values.enumerated() {
            let index = Int32(offset + 1)
            let code: Int32
            switch value {
            case .int(let int): code = sqlite3_bind_int64(pointer, index, Int64(int))
            case .text(let text):
                // With its byte length, not as a C string: a NUL inside an ID or key is kept.
                var text = text
                code = text.withUTF8 { utf8 in
                    utf8.withMemoryRebound(to: CChar.self) { chars in
                        withUnsafePointer(to: CChar(0)) { empty in
                            sqlite3_bind_text64(pointer, index, chars.baseAddress ?? empty, UInt64(chars.count),
                                                Self.transient, UInt8(SQLITE_UTF8))
                        }
                    }
                }
            case .blob(let bytes):
                code = bytes.withUnsafeBytes { raw in
                    sqlite3_bind_blob64(pointer, index, raw.baseAddress ?? UnsafeRawPointer(bitPattern: 1), UInt64(raw.count), Self.transient)
                }
            case .null: code = sqlite3_bind_null(pointer, index)
            }
            guard code == SQLITE_OK else {
                throw SQLiteConnection.failure("bind", code: code, message: connection.lastErrorMessage)
            }
        }
    }

    /// Advances to the next row; false when done.
    public func step() throws(CouchError) -> Bool {
        let code = sqlite3_step(pointer)
        switch code {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        default:
            let message = connection.lastErrorMessage
            let systemErrno = connection.systemErrno
            sqlite3_reset(pointer)
            if code & 0xff == SQLITE_CONSTRAINT {
                throw CouchError(.conflict, "Document update conflict.")
            }
            throw SQLiteConnection.failure("step \(String(cString: sqlite3_sql(pointer)))", code: code, message: message,
                                           systemErrno: systemErrno, path: connection.path)
        }
    }

    public func int(_ column: Int32) -> Int { Int(sqlite3_column_int64(pointer, column)) }
    public func isNull(_ column: Int32) -> Bool { sqlite3_column_type(pointer, column) == SQLITE_NULL }
    public func byteCount(_ column: Int32) -> Int { Int(sqlite3_column_bytes(pointer, column)) }
    public func text(_ column: Int32) -> String {
        guard let bytes = sqlite3_column_text(pointer, column) else { return "" }
        let count = Int(sqlite3_column_bytes(pointer, column))
        return String(decoding: UnsafeBufferPointer(start: bytes, count: count), as: UTF8.self)
    }
    public func blob(_ column: Int32) -> [UInt8] {
        let count = Int(sqlite3_column_bytes(pointer, column))
        guard count > 0, let bytes = sqlite3_column_blob(pointer, column) else { return [] }
        return Array(UnsafeRawBufferPointer(start: bytes, count: count))
    }
    /// A blob (or text) column's bytes, borrowed from the statement for the call (empty if NULL).
    public func withBlob<T>(_ column: Int32, _ body: (UnsafeRawBufferPointer) throws -> T) rethrows -> T {
        let bytes = sqlite3_column_blob(pointer, column)
        let count = Int(sqlite3_column_bytes(pointer, column))
        return try body(UnsafeRawBufferPointer(start: count > 0 ? bytes : nil, count: count > 0 ? count : 0))
    }

    /// Appends a blob column to `output` without an intermediate array.
    public func appendBlob(_ column: Int32, to output: inout [UInt8]) {
        let count = Int(sqlite3_column_bytes(pointer, column))
        guard count > 0, let bytes = sqlite3_column_blob(pointer, column) else { return }
        output.append(contentsOf: UnsafeRawBufferPointer(start: bytes, count: count))
    }
}
