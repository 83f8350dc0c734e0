import Foundation

/// Gives freed heap back to the system after large releases (closing or deleting databases):
/// glibc keeps freed memory in its arenas otherwise, and RSS only grows. Coalesced, off
/// the request's thread.
public enum MemoryRelease {
    private static let queue = DispatchQueue(label: "couchette.malloc-trim")
    private static let lock = NSLock()
    nonisolated(unsafe) private static var scheduled = false

    public static func soon() {
        let schedule = lock.withLock { () -> Bool in
            defer { scheduled = true }
            return !scheduled
        }
        guard schedule else { return }
        queue.asyncAfter(deadline: .now() + .milliseconds(200)) {
            lock.withLock { scheduled = false }
            now()
        }
    }

    /// glibc's `malloc_trim`, looked up at run time (Swift's Glibc module does not export
    /// `malloc.h`); nil on other C libraries.
    private static let trim: (@convention(c) (Int) -> Int32)? = {
        guard let symbol = dlsym(dlopen(nil, RTLD_NOW), "malloc_trim") else { return nil }
        return unsafeBitCast(symbol, to: (@convention(c) (Int) -> Int32).self)
    }()

    public static func now() {
        _ = trim?(0)
    }

    /// glibc's `mallopt`, looked up the same way.
    private static let setOption: (@convention(c) (Int32, Int32) -> Int32)? = {
        guard let symbol = dlsym(dlopen(nil, RTLD_NOW), "mallopt") else { return nil }
        return unsafeBitCast(symbol, to: (@convention(c) (Int32, Int32) -> Int32).self)
    }()

    /// Caps glibc's malloc arenas (`M_ARENA_MAX`) unless `MALLOC_ARENA_MAX` already says how
    /// many: by default glibc opens up to eight per core, and what each holds after a busy
    /// spell stays resident apart from the others. Too few, and two busy threads may share
    /// one for good (a thread keeps the arena it was given), each waiting on the other's
    /// lock for every block too large for its own cache. (`scripts/bench --million`: with 4,
    /// a million documents loaded at 55,000–56,000 a second in two runs of three, against
    /// 70,000–77,000; with 64, 70,000–76,000 in all, 29.6 MB resident after the load against
    /// 29.1, and the same 24 MB after start.)
    public static func limitArenas(to count: Int32) {
        guard getenv("MALLOC_ARENA_MAX") == nil else { return }
        _ = setOption?(-8 /* M_ARENA_MAX */, count)
    }

    /// Fixes the size from which glibc maps a block of its own (`M_MMAP_THRESHOLD`), unless
    /// `MALLOC_MMAP_THRESHOLD_` says: by default glibc raises it to the largest block freed
    /// (up to 32 MB), so after one big response (a 20 MB `_all_docs`) every later one is cut
    /// from the arenas, whose freed pages stay resident in pieces. Fixed, such blocks go back
    /// to the system when freed. (`scripts/bench`: RSS after the workloads 49.5–54.5 MB →
    /// 47.7–48.1 MB, rates within the run-to-run spread.)
    public static func returnLargeBlocks(from bytes: Int32) {
        guard getenv("MALLOC_MMAP_THRESHOLD_") == nil else { return }
        _ = setOption?(-3 /* M_MMAP_THRESHOLD */, bytes)
    }
}
