import Dispatch

/// Runs blocking work (SQLite reads, group commits) on Dispatch's threads, so the few
/// threads that run Swift's tasks keep serving HTTP transfers while the store works.
enum Blocking {
    private static let queue = DispatchQueue(label: "couchette.replication.store", attributes: .concurrent)

    static func run<Value: Sendable>(_ work: @escaping @Sendable () throws -> Value) async throws -> Value {
        try await withCheckedThrowingContinuation { continuation in
            queue.async { continuation.resume(with: Result { try work() }) }
        }
    }
}
