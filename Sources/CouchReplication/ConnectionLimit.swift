import Foundation

/// At most `limit` requests of one job at a time (CouchDB's `http_connections`, 20 by
/// default): a job's requests wait for each other, never for another job's. The job's
/// continuous feed is not counted: it has a connection of its own for its whole life.
final class ConnectionLimit: @unchecked Sendable {
    private let lock = NSLock()
    private var available: Int
    private var waiting: [CheckedContinuation<Void, Never>] = []

    init(_ limit: Int) {
        available = max(1, limit)
    }

    /// Runs `body` holding one of the job's places.
    func withPlace<T>(_ body: () async throws(ReplicationError) -> T) async throws(ReplicationError) -> T {
        await acquire()
        defer { release() }
        return try await body()
    }

    private func acquire() async {
        let acquired = lock.withLock {
            guard available > 0 else { return false }
            available -= 1
            return true
        }
        if acquired { return }
        await withCheckedContinuation { continuation in
            let now = lock.withLock {
                if available > 0 {
                    available -= 1
                    return true
                }
                waiting.append(continuation)
                return false
            }
            if now { continuation.resume() }
        }
    }

    private func release() {
        let next: CheckedContinuation<Void, Never>? = lock.withLock {
            if waiting.isEmpty {
                available += 1
                return nil
            }
            return waiting.removeFirst()
        }
        next?.resume()
    }
}
