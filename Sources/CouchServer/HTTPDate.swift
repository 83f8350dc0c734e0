import CouchCore
import Foundation

/// Dates as HTTP writes them (`Date`, `Expires`): `Thu, 01 Jan 1970 00:00:00 GMT`.
enum HTTPDate {
    private static let lock = NSLock()
    nonisolated(unsafe) private static var cached: (second: Int, text: String) = (-1, "")

    /// The current time, formatted at most once a second for every response of that second.
    static func now() -> String {
        let seconds = Int(time(nil))
        lock.lock()
        defer { lock.unlock() }
        if cached.second != seconds { cached = (seconds, Timestamp.rfc1123(seconds)) }
        return cached.text
    }
}
