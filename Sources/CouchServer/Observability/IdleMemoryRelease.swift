import CouchStore
import Foundation

/// Gives the memory freed by past requests back to the system once requests stop: glibc's
/// allocator keeps what large answers, bulk loads and many threads freed in its arenas,
/// so without a trim the resident size stays at its peak for as long as the server runs.
/// Checks once a second; trims once after each busy spell, when a whole second passed
/// with no request handled (a trim in the middle of a load would only be faulted back in).
final class IdleMemoryRelease: @unchecked Sendable {
    private let queue = DispatchQueue(label: "couchette.idle-memory-release")
    private let timer: DispatchSourceTimer
    private let requestCount: @Sendable () -> Int
    /// Frees caches worth freeing when idle (SQLite's page caches), before the trim.
    private let releaseCaches: @Sendable () -> Void
    // Touched on `queue` only.
    private var lastSeen = 0
    private var released = 0

    init(requestCount: @escaping @Sendable () -> Int, releaseCaches: @escaping @Sendable () -> Void) {
        self.requestCount = requestCount
        self.releaseCaches = releaseCaches
        timer = DispatchSource.makeTimerSource(queue: queue)
        timer.setEventHandler { [weak self] in self?.tick() }
        timer.schedule(deadline: .now() + 1, repeating: 1, leeway: .milliseconds(250))
        timer.resume()
    }

    deinit { timer.cancel() }

    private func tick() {
        let count = requestCount()
        defer { lastSeen = count }
        guard count == lastSeen, count != released else { return }
        released = count
        releaseCaches()
        MemoryRelease.now()
    }
}
