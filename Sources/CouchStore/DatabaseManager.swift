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
    private let logger = Logger(label: "couchette.store")
    static let fileExtension = ".couch"

    public init(directory: String) throws {
        self.directory = directory
        do {
            // Owner only: the databases hold `_users`' password hashes.
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true,
                                                    attributes: [.posixPermissions: 0o700])
        } catch {
            throw CouchError.internalError("cannot create data directory \(directory)")
        }
        serverUUID = try Self.loadOrCreateUUID(in: directory)
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

    public func create(_ name: DatabaseName) throws -> Database {
        lock.lock()
        defer { lock.unlock() }
        let path = path(for: name)
        if open[name] != nil || FileManager.default.fileExists(atPath: path) { throw CouchError.databaseExists }
        let database = try Database(name: name, path: path, create: true)
        open[name] = database
        logger.info("created database \(name)")
        return database
    }

    /// The open database, opening its file on first use; `not_found` if it does not exist.
    public func database(_ name: DatabaseName) throws -> Database {
        lock.lock()
        defer { lock.unlock() }
        if let database = open[name] { return database }
        let path = path(for: name)
        guard FileManager.default.fileExists(atPath: path) else { throw CouchError.databaseMissing }
        let database = try Database(name: name, path: path, create: false)
        open[name] = database
        return database
    }

    public func delete(_ name: DatabaseName) throws {
        lock.lock()
        let path = path(for: name)
        let database = open.removeValue(forKey: name)
        guard database != nil || FileManager.default.fileExists(atPath: path) else {
            lock.unlock()
            throw CouchError.databaseMissing
        }
        // Open connections keep reading the unlinked file until they close.
        for suffix in ["", "-wal", "-shm"] { unlink(path + suffix) }
        try? FileManager.default.removeItem(atPath: Database.attachmentDirectory(for: path))
        lock.unlock()
        database?.notifier.post(.databaseDeleted)
        logger.info("deleted database \(name)")
    }

    /// Every database in the directory, sorted by name.
    public func allNames() -> [DatabaseName] {
        let files = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        return files.compactMap { file -> DatabaseName? in
            guard file.hasSuffix(Self.fileExtension) else { return nil }
            return DatabaseName(fileStem: String(file.dropLast(Self.fileExtension.count)))
        }.sorted()
    }
}
