import CouchCore
import Foundation

/// Read connections of one database. WAL lets them read while the writer writes;
/// each is used by one thread at a time and returned after the read.
final class ReaderPool: @unchecked Sendable {
    private let path: String
    private let lock = NSLock()
    private var idle: [SQLiteConnection] = []
    private let maximumIdle = 16
    private static let mappedBytes = 1 << 30
    private var lastUse = DispatchTime.now().uptimeNanoseconds

    init(path: String) { self.path = path }

    func withConnection<T>(_ body: (SQLiteConnection) throws -> T) throws -> T {
        let connection = try checkOut()
        defer { checkIn(connection) }
        return try body(connection)
    }

    private func checkOut() throws(CouchError) -> SQLiteConnection {
        lock.lock()
        if let connection = idle.popLast() {
            lock.unlock()
            return connection
        }
        lock.unlock()
        let connection = try SQLiteConnection(path: path)
        try connection.execute("PRAGMA query_only=1")
        // Pages read through a mapping rather than a pread and a copy each: scans (_changes,
        // _all_docs) spent a third of their time in those calls. The mapping goes with the
        // connection when the database idles.
        try connection.execute("PRAGMA mmap_size=\(Self.mappedBytes)")
        return connection
    }

    /// Closes the idle connections, giving back their page caches (each up to SQLite's default
    /// 2 MB) and their file mappings; the next read opens one again.
    func releaseCacheMemory() {
        _ = lock.withLock { takeIdle() }  // closed here, outside the lock
    }

    private func checkIn(_ connection: SQLiteConnection) {
        lock.lock()
        defer { lock.unlock() }
        lastUse = DispatchTime.now().uptimeNanoseconds
        if idle.count < maximumIdle { idle.append(connection) }
    }

    /// Closes the idle connections if none was used for `seconds`: an idle database holds
    /// no descriptor (the next read opens one). Whether it closed any.
    @discardableResult
    func closeIfIdle(for seconds: Double) -> Bool {
        let closed: [SQLiteConnection] = lock.withLock {
            guard DispatchTime.now().uptimeNanoseconds &- lastUse > UInt64(seconds * 1e9) else { return [] }
            return takeIdle()
        }
        return !closed.isEmpty   // closed here, outside the lock
    }

    /// The idle connections, no longer in the pool. Called under the lock.
    private func takeIdle() -> [SQLiteConnection] {
        defer { idle.removeAll() }
        return idle
    }
}
