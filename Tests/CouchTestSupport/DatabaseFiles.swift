import CSQLite
import Foundation

/// What a user would check on a data directory after a crash: SQLite's own verdict on
/// every file, and the attachment bodies lying beside each database.
public enum DatabaseFiles {
    /// Every SQLite file of a data directory (databases, the `_db_updates` log).
    public static func sqliteFiles(in directory: String) -> [String] {
        let files = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        return files.filter { $0.hasSuffix(".couch") || $0.hasSuffix(".sqlite") }.sorted().map { directory + "/" + $0 }
    }

    /// `PRAGMA integrity_check` on one file, opened read-write so that a WAL left by a
    /// crash is recovered exactly as the server would recover it: "ok" or SQLite's complaints.
    public static func integrityCheck(_ path: String) -> String {
        var handle: OpaquePointer?
        defer { sqlite3_close_v2(handle) }
        guard sqlite3_open_v2(path, &handle, SQLITE_OPEN_READWRITE, nil) == SQLITE_OK else {
            return "cannot open: " + String(cString: sqlite3_errmsg(handle))
        }
        sqlite3_busy_timeout(handle, 10_000)
        var statement: OpaquePointer?
        guard sqlite3_prepare_v2(handle, "PRAGMA integrity_check", -1, &statement, nil) == SQLITE_OK else {
            return "cannot prepare: " + String(cString: sqlite3_errmsg(handle))
        }
        defer { sqlite3_finalize(statement) }
        var lines: [String] = []
        while sqlite3_step(statement) == SQLITE_ROW {
            lines.append(String(cString: sqlite3_column_text(statement, 0)))
        }
        return lines.isEmpty ? "no answer: " + String(cString: sqlite3_errmsg(handle)) : lines.joined(separator: "; ")
    }

    /// The attachment bodies stored for a database (its `.attachments` directory, staging
    /// files apart), and the staging files left there.
    public static func blobs(of database: String, in directory: String) -> (stored: [String], staging: [String]) {
        let folder = directory + "/" + database + ".attachments"
        let stored = ((try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []).filter { $0 != "staging" && $0 != "pending" }
        let staging = (try? FileManager.default.contentsOfDirectory(atPath: folder + "/staging")) ?? []
        return (stored, staging)
    }
}
