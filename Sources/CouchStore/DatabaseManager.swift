import CouchCore
import Foundation
import Logging

/// The databases in one data directory: creates, opens (once, then shared), lists and
/// deletes them. A database is the file `<fileStem>.couch` beside its `-wal`/`-shm`.
public final class DatabaseManager: @unchecked Sendable {
    public let directory: String
    /// Stable across restarts; PouchDB derives replication IDs from it.
    public let serverUUID: String
    private let lock = NSLock()
    private var open: [DatabaseName: Database] = [:]
    private var installedValidator: DocumentValidator?
    /// Checks every write to every database (design documents' validation functions, as
    /// the server wires it); applies to databases already open and to those opened later.
    public var validator: DocumentValidator? {
        get { lock.withLock { installedValidator } }
        set {
            let databases = lock.withLock {
                installedValidator = newValue
                return Array(open.values)
            }
            for database in databases { database.validator = newValue }
        }
    }
    /// `[couchdb] max_partition_size` for every partitioned database, open now or later.
    public var maximumPartitionSize: Int {
        get { lock.withLock { partitionSizeLimit } }
        set {
            let databases = lock.withLock {
                partitionSizeLimit = newValue
                return Array(open.values)
            }
            for database in databases { database.maximumPartitionSize = newValue }
        }
    }
    private var partitionSizeLimit = 0
    /// `[attachments] compressible_types` and `compression_level` for every database, open now or later.
    public var attachmentCompression: AttachmentCompression {
        get { lock.withLock { compression } }
        set {
            let databases = lock.withLock {
                compression = newValue
                return Array(open.values)
            }
            for database in databases { database.attachments.compression = newValue }
        }
    }
    private var compression = AttachmentCompression()
    private let logger = Logger(label: "couchette.store")
    /// Every database's creation, updates and deletion, for `GET /_db_updates`.
    public let updates: DatabaseUpdateLog
    /// This process's ownership of the directory (see `DataDirectoryLock`).
    public let ownership: DataDirectoryLock
    static let fileExtension = ".couch"
    private var creationObservers: [@Sendable (Database) -> Void] = []

    /// Calls `observer` with every database created from now on (the replicator watches
    /// new `*/_replicator` databases), on the creating thread, after the creation.
    public func observeCreations(_ observer: @escaping @Sendable (Database) -> Void) {
        lock.withLock { creationObservers.append(observer) }
    }

    /// Opens the data directory, taking it for this process: throws `DataDirectoryLock.InUse`
    /// when another process has it open.
    public init(directory: String) throws {
        self.directory = directory
        do {
            // Owner only: the databases hold `_users`' password hashes.
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true,
                                                    attributes: [.posixPermissions: 0o700])
        } catch {
            throw CouchError.internalError("cannot create data directory \(directory)")
        }
        ownership = try DataDirectoryLock(directory: directory)
        serverUUID = try Self.loadOrCreateUUID(in: directory)
        updates = try DatabaseUpdateLog(directory: directory)
        // Made last: a dispatch source released before it was resumed traps (an `init` that threw).
        let timer = DispatchSource.makeTimerSource(queue: DispatchQueue.global(qos: .utility))
        timer.setEventHandler { [weak self] in self?.closeIdleConnections() }
        timer.schedule(deadline: .now() + Self.idleConnectionSeconds, repeating: Self.idleConnectionSeconds)
        timer.resume()
        idleConnections = timer
    }

    deinit { idleConnections?.cancel() }

    /// How long an open database may go unused before its connections close: it then holds no
    /// file descriptor (a thousand open databases, a thousand descriptors fewer than six each).
    public static let idleConnectionSeconds = 10.0
    private var idleConnections: DispatchSourceTimer?

    private var openDatabases: [Database] { lock.withLock { Array(open.values) } }

    private func closeIdleConnections() {
        var closed = false
        for database in openDatabases where database.closeConnectionsIfIdle(for: Self.idleConnectionSeconds) {
            closed = true
        }
        // What the connections held (~70 KB each: SQLite's page cache and schema) goes back
        // to the system, not only to glibc's arenas.
        if closed { MemoryRelease.soon() }
    }

    /// Documents written to every database since start (sequences committed), for `_stats`.
    public var documentWrites: Int { writeCounter.value }
    private let writeCounter = WriteCounter()

    /// How many databases are open now.
    public var openCount: Int { lock.withLock { open.count } }

    /// Registers a database just opened: its commits become `updated` events and count as writes.
    private func opened(_ database: Database) -> Database {
        let updates = self.updates, name = database.name, counter = writeCounter
        let last = WriteCounter()
        last.add(database.updateSequence)
        _ = database.notifier.observe { event in
            guard case .committed(let sequence) = event else { return }
            counter.add(last.exchange(sequence))
            updates.record(.updated, name)
        }
        database.validator = installedValidator
        database.maximumPartitionSize = partitionSizeLimit
        database.attachments.compression = compression
        closeIdleDatabases(toMake: 1)
        open[database.name] = database
        useClock &+= 1
        lastUse[database.name] = useClock
        return database
    }

    /// CouchDB's `[couchdb] max_dbs_open`: beyond it, opening a database first closes the
    /// least recently used idle ones. A database is idle when nothing but this cache holds it:
    /// no request, feed, replication or write in progress (each holds a reference), so two
    /// instances of one file never coexist. When none is idle the limit is exceeded.
    public var maximumOpen: Int {
        get { lock.withLock { openLimit } }
        set { lock.withLock { openLimit = max(1, newValue) } }
    }
    private var openLimit = 500
    private var lastUse: [DatabaseName: UInt64] = [:]
    private var useClock: UInt64 = 0
    /// Databases closed by the cache since start.
    public private(set) var closedIdleCount = 0

    /// With the lock held: closes idle databases, oldest use first, until `room` more fit.
    private func closeIdleDatabases(toMake room: Int) {
        guard open.count + room > openLimit else { return }
        let oldestFirst = lastUse.sorted { $0.value < $1.value }.map(\.key)
        var closed = 0
        for name in oldestFirst where open.count + room > openLimit {
            guard var candidate = open.removeValue(forKey: name) else {
                lastUse[name] = nil
                continue
            }
            if isKnownUniquelyReferenced(&candidate) {
                lastUse[name] = nil
                closed += 1
            } else {
                open[name] = candidate
            }
        }
        closedIdleCount += closed
        if closed > 0 { MemoryRelease.soon() }
    }

    private static func loadOrCreateUUID(in directory: String) throws -> String {
        let path = directory + "/server-uuid"
        if let data = FileManager.default.contents(atPath: path),
           let text = String(data: data, encoding: .utf8)?.trimmingCharacters(in: .whitespacesAndNewlines),
           text.count == 32 {
            return text
        }
        let uuid = Digest.randomHex(bytes: 16)
        let temporary = path + ".tmp"
        guard FileManager.default.createFile(atPath: temporary, contents: Data(uuid.utf8)),
              rename(temporary, path) == 0 else {
            throw CouchError.internalError("cannot write \(path)")
        }
        return uuid
    }

    func path(for name: DatabaseName) -> String {
        directory + "/" + name.fileStem + Self.fileExtension
    }

    public func exists(_ name: DatabaseName) -> Bool {
        lock.lock()
        defer { lock.unlock() }
        return open[name] != nil || FileManager.default.fileExists(atPath: path(for: name))
    }

    public func create(_ name: DatabaseName, partitioned: Bool = false) throws -> Database {
        lock.lock()
        let path = path(for: name)
        if open[name] != nil || FileManager.default.fileExists(atPath: path) {
            lock.unlock()
            throw CouchError.databaseExists
        }
        let database: Database
        do {
            database = opened(try Database(name: name, path: path, create: true, partitioned: partitioned))
        } catch {
            lock.unlock()
            throw error
        }
        let observers = creationObservers
        lock.unlock()
        logger.info("created database \(name)")
        updates.record(.created, name)
        observers.forEach { $0(database) }
        return database
    }

    /// The open database, opening its file on first use; `not_found` if it does not exist.
    public func database(_ name: DatabaseName) throws -> Database {
        lock.lock()
        defer { lock.unlock() }
        if let database = open[name] {
            useClock &+= 1
            lastUse[name] = useClock
            return database
        }
        let path = path(for: name)
        guard FileManager.default.fileExists(atPath: path) else { throw CouchError.databaseMissing }
        return opened(try Database(name: name, path: path, create: false))
    }

    /// Whether `database` is still what its name opens (not deleted, perhaps created again since).
    public func isCurrent(_ database: Database) -> Bool {
        lock.withLock { open[database.name] === database }
    }

    public func delete(_ name: DatabaseName) throws {
        lock.lock()
        let path = path(for: name)
        let database = open.removeValue(forKey: name)
        lastUse[name] = nil
        guard database != nil || FileManager.default.fileExists(atPath: path) else {
            lock.unlock()
            throw CouchError.databaseMissing
        }
        // Open connections keep reading the unlinked file until they close.
        for suffix in ["", "-wal", "-shm"] { unlink(path + suffix) }
        try? FileManager.default.removeItem(atPath: Database.attachmentDirectory(for: path))
        try? FileManager.default.removeItem(atPath: Database.indexDirectory(for: path))
        lock.unlock()
        database?.notifier.post(.databaseDeleted)
        updates.record(.deleted, name)
        logger.info("deleted database \(name)")
        MemoryRelease.soon()
    }

    /// Closes the open databases' idle read connections, with their page caches and file
    /// mappings (the server calls it when requests stop, before trimming the allocator).
    public func releaseCacheMemory() {
        openDatabases.forEach { $0.readers.releaseCacheMemory() }
    }

    /// Every database in the directory, sorted by name.
    /// Throws when the directory cannot be read (no descriptor left...): an empty list would
    /// be a wrong answer.
    public func allNames() throws(CouchError) -> [DatabaseName] {
        let files: [String]
        do {
            files = try FileManager.default.contentsOfDirectory(atPath: directory)
        } catch {
            logger.error("cannot list the data directory \(directory): \(error)")
            throw CouchError.internalError("cannot list the databases")
        }
        return files.compactMap { file -> DatabaseName? in
            guard file.hasSuffix(Self.fileExtension) else { return nil }
            return DatabaseName(fileStem: String(file.dropLast(Self.fileExtension.count)))
        }.sorted()
    }
}

/// A count shared by commit observers.
final class WriteCounter: @unchecked Sendable {
    private let lock = NSLock()
    private var total = 0

    var value: Int { lock.withLock { total } }

    func add(_ count: Int) { lock.withLock { total &+= max(0, count) } }

    /// Sets the value and answers by how much it grew.
    func exchange(_ new: Int) -> Int {
        lock.withLock {
            defer { total = max(total, new) }
            return max(0, new - total)
        }
    }
}
