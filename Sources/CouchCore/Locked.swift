#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A value behind a pthread mutex, used as the standard library's `Mutex` would be.
///
/// Why not `Mutex`: on Linux a contended `Mutex` is taken and given back by the kernel
/// (priority-inheriting futex calls), which ThreadSanitizer cannot see, so every section two
/// threads had entered in turn showed as a race and real ones drowned among them; it
/// intercepts a pthread mutex. The cost is one allocation when the value is made.
public final class Locked<Value>: @unchecked Sendable {
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private var value: Value

    public init(_ value: Value) {
        self.value = value
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    public func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }
}
