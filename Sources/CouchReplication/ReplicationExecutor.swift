import CouchCore

/// Where replication tasks run: threads of their own, not the few threads Swift shares
/// among all tasks of the process (nor Dispatch's, which grow only slowly when blocked).
/// Code that blocks those shared threads (a synchronous handler, an embedding app) then
/// cannot stall replications, and replications cannot stall it. Child tasks (task groups,
/// `async let`) inherit the preference; the replicator starts its unstructured tasks with
/// `ReplicationTasks`.
@available(macOS 15.0, iOS 18.0, tvOS 18.0, watchOS 11.0, *)
public final class ReplicationExecutor: TaskExecutor, @unchecked Sendable {
    public static let shared = ReplicationExecutor()

    private let threads = ThreadPool(name: "replication", threads: 4)

    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedTaskExecutor()
        threads.submit { job.runSynchronously(on: executor) }
    }
}

/// Unstructured tasks of the replicator, on `ReplicationExecutor` where the platform has
/// task executors.
public enum ReplicationTasks {
    @discardableResult
    public static func task<Success: Sendable>(_ operation: sending @escaping @isolated(any) () async -> Success) -> Task<Success, Never> {
        if #available(macOS 15.0, iOS 18.0, tvOS 18.0, watchOS 11.0, *) {
            return Task(executorPreference: ReplicationExecutor.shared, operation: operation)
        }
        return Task(operation: operation)
    }

    @discardableResult
    public static func throwingTask<Success: Sendable>(
        _ operation: sending @escaping @isolated(any) () async throws -> Success
    ) -> Task<Success, Error> {
        if #available(macOS 15.0, iOS 18.0, tvOS 18.0, watchOS 11.0, *) {
            return Task(executorPreference: ReplicationExecutor.shared, operation: operation)
        }
        return Task(operation: operation)
    }
}
