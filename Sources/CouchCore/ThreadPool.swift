#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// At most `threads` threads taking work from one queue, each started the first time work
/// finds every started thread busy. Unlike Dispatch's shared pools, whose width follows the
/// number of cores and grows only after a delay when work blocks, work here never waits
/// behind unrelated work of the process (blocking store work, the replicator's tasks, routes
/// that run JavaScript or build an index); and a pool nothing uses costs no thread. Threads
/// stay once started: threads that ran JavaScript are known to its engine (which signals them
/// for its garbage collector), and when idle ones ended, ThreadSanitizer's runtime failed a
/// check of its own on a thread that had no state left. (On pthreads directly: CouchCore does
/// without Foundation.)
public final class ThreadPool: @unchecked Sendable {
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    private var work = ReleasingQueue<@Sendable () -> Void>()
    private let name: String
    private var limit: Int
    private var started = 0
    private var waiting = 0

    /// The process's one pool of this name, allowed at least `threads` threads. Threads never
    /// end, so a pool per server would leave its threads behind each server a process starts
    /// and stops (a test run reached ~900 threads); the servers of one process share theirs,
    /// as many at once as the largest of them asked for.
    public static func shared(name: String, threads: Int) -> ThreadPool {
        let pool = sharedPools.withLock { pools in
            if let pool = pools[name] { return pool }
            let pool = ThreadPool(name: name, threads: threads)
            pools[name] = pool
            return pool
        }
        pool.allow(threads)
        return pool
    }
    private static let sharedPools = Locked<[String: ThreadPool]>([:])

    private func allow(_ threads: Int) {
        pthread_mutex_lock(mutex)
        limit = max(limit, threads)
        pthread_mutex_unlock(mutex)
    }

    /// `name` (at most 15 bytes shown) names the threads, as `top -H` and debuggers list them.
    public init(name: String, threads: Int) {
        self.name = name
        limit = max(1, threads)
        pthread_mutex_init(mutex, nil)
        pthread_cond_init(condition, nil)
    }

    deinit {
        // Each thread holds its pool: this runs only for a pool that never started one.
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        condition.deallocate()
        mutex.deallocate()
    }

    public func submit(_ item: @escaping @Sendable () -> Void) {
        pthread_mutex_lock(mutex)
        work.append(item)
        // A waiting thread signalled but not yet awake still counts as waiting: work beyond
        // what the waiting threads will take needs a thread of its own.
        let startsThread = work.count > waiting && started < limit
        if startsThread { started += 1 }
        pthread_cond_signal(condition)
        pthread_mutex_unlock(mutex)
        if startsThread { startThread() }
    }

    private func startThread() {
        var thread = pthread_t()
        let context = Unmanaged.passRetained(self).toOpaque()
        let created = pthread_create(&thread, nil, { context in
            Unmanaged<ThreadPool>.fromOpaque(context!).takeRetainedValue().run()
            return nil
        }, context)
        if created == 0 {
            pthread_detach(thread)
            return
        }
        Unmanaged<ThreadPool>.fromOpaque(context).release()
        pthread_mutex_lock(mutex)
        started -= 1
        let orphaned = started == 0
        pthread_mutex_unlock(mutex)
        // No thread could be made (the process is out of them): rather than leave the work
        // waiting for a thread that may never come, the caller does it.
        while orphaned, let item = take() { item() }
    }

    private func take() -> (@Sendable () -> Void)? {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return work.popFirst()
    }

    private func run() {
        // Process signals (SIGINT, SIGTERM) go to the threads that wait for them: a pool
        // thread must not take and lose them.
        var signals = sigset_t()
        sigemptyset(&signals)
        sigaddset(&signals, SIGINT)
        sigaddset(&signals, SIGTERM)
        pthread_sigmask(SIG_BLOCK, &signals, nil)
        _ = setThreadName(pthread_self(), String(decoding: name.utf8.prefix(15), as: UTF8.self))
        while true {
            pthread_mutex_lock(mutex)
            waiting += 1
            while work.isEmpty { pthread_cond_wait(condition, mutex) }
            waiting -= 1
            let item = work.popFirst()
            pthread_mutex_unlock(mutex)
            item?()
        }
    }
}

/// glibc's `pthread_setname_np`, which its Swift overlay does not declare (it needs _GNU_SOURCE).
@_silgen_name("pthread_setname_np")
private func setThreadName(_ thread: pthread_t, _ name: UnsafePointer<CChar>) -> Int32
