import Foundation

/// The last error of a series of attempts while it is recent, shared by the threads making them
/// (an answer's fetches of on-demand attachment bodies stop for a while after one fails).
final class RecentFailure: @unchecked Sendable {
    private let lock = NSLock()
    private let lifetime: UInt64
    private let now: @Sendable () -> UInt64
    private var last: (error: Error, at: UInt64)?

    /// `now`: the clock, in nanoseconds (the system's monotonic one but in tests).
    init(seconds: Double, now: @escaping @Sendable () -> UInt64 = { DispatchTime.now().uptimeNanoseconds }) {
        lifetime = UInt64(seconds * 1e9)
        self.now = now
    }

    /// The last error recorded, if it was less than the lifetime ago.
    var error: Error? {
        lock.withLock {
            guard let last, now() &- last.at < lifetime else { return nil }
            return last.error
        }
    }

    func record(_ error: Error) {
        lock.withLock { last = (error, now()) }
    }
}
