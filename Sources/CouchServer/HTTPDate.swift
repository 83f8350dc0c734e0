import Foundation

/// Dates as HTTP writes them (`Date`, `Expires`): `Thu, 01 Jan 1970 00:00:00 GMT`.
enum HTTPDate {
    private static let lock = NSLock()
    nonisolated(unsafe) private static var cached: (second: Int, text: String) = (-1, "")

    static func format(_ seconds: Int) -> String {
        var time = time_t(seconds)
        var parts = tm()
        gmtime_r(&time, &parts)
        let days = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
        let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
        return "\(days[Int(parts.tm_wday)]), \(two(parts.tm_mday)) \(months[Int(parts.tm_mon)]) \(parts.tm_year + 1900) "
            + "\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec)) GMT"
    }

    /// The current time, formatted at most once a second for every response of that second.
    static func now() -> String {
        let seconds = Int(time(nil))
        lock.lock()
        defer { lock.unlock() }
        if cached.second != seconds { cached = (seconds, format(seconds)) }
        return cached.text
    }
}
