import CouchCore

/// Runs blocking work (SQLite reads, group commits) on threads that may block, so the
/// threads that run tasks keep serving HTTP transfers while the store works.
enum Blocking {
    private static let threads = ThreadPool(name: "repl-store", threads: 8)

    static func run<Value: Sendable>(_ work: @escaping @Sendable () throws -> Value) async throws -> Value {
        try await withCheckedThrowingContinuation { continuation in
            threads.submit { continuation.resume(with: Result { try work() }) }
        }
    }
}
