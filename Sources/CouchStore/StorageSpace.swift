import Foundation

/// Whether a database file can still grow: SQLite reports a write that failed for want of
/// space (ENOSPC, or EFBIG past the process's file size limit) as a plain I/O error, so
/// the cause is looked for after the fact.
enum StorageSpace {
    /// Below this, a file system is taken as full (a database page and its log frame fit in
    /// far less, but SQLite writes several at once).
    static let reserve: UInt64 = 1 << 20

    static func isExhausted(for path: String) -> Bool {
        var limit = rlimit()
        if getrlimit(__rlimit_resource_t(RLIMIT_FSIZE.rawValue), &limit) == 0, limit.rlim_cur != rlim_t.max {
            for file in [path, path + "-wal", path + "-journal"] {
                var info = stat()
                if stat(file, &info) == 0, UInt64(info.st_size) + reserve >= UInt64(limit.rlim_cur) { return true }
            }
        }
        var space = statvfs()
        let directory = (path as NSString).deletingLastPathComponent
        if statvfs(directory.isEmpty ? "." : directory, &space) == 0 {
            return UInt64(space.f_bavail) * UInt64(space.f_frsize) < reserve
        }
        return false
    }
}
