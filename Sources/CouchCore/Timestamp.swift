#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Dates as CouchDB writes them, from seconds since 1970, in UTC and without a locale.
/// (Foundation's date formatters load ICU's data on first use: megabytes of resident pages
/// for thirty characters.)
public enum Timestamp {
    private static let days = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
    private static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    /// RFC 1123, as HTTP's `Date` and CouchDB's `httpd_util:rfc1123_date` write it:
    /// `Thu, 01 Jan 1970 00:00:00 GMT`.
    public static func rfc1123(_ seconds: Int) -> String {
        let parts = utc(seconds)
        return "\(days[Int(parts.tm_wday)]), \(two(parts.tm_mday)) \(months[Int(parts.tm_mon)]) \(parts.tm_year + 1900) "
            + "\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec)) GMT"
    }

    /// ISO 8601 in UTC, as `_scheduler` and `_replicator` documents write it: `2017-04-29T05:01:37Z`.
    public static func iso8601(_ seconds: Int) -> String {
        let parts = utc(seconds)
        let year = String(parts.tm_year + 1900)
        return String(repeating: "0", count: max(0, 4 - year.count)) + year
            + "-\(two(parts.tm_mon + 1))-\(two(parts.tm_mday))T\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec))Z"
    }

    /// The seconds an ISO 8601 date-time names (`2017-04-29T05:01:37Z`, or with an offset such
    /// as `+02:00`); nil for anything else.
    public static func seconds(iso8601 text: String) -> Int? {
        let bytes = Array(text.utf8)
        guard bytes.count == 20 || bytes.count == 25 else { return nil }
        func number(_ range: Range<Int>) -> Int32? {
            var value: Int32 = 0
            for byte in bytes[range] {
                guard (48...57).contains(byte) else { return nil }
                value = value * 10 + Int32(byte - 48)
            }
            return value
        }
        func separator(_ index: Int, _ character: Character) -> Bool { bytes[index] == character.asciiValue }
        guard separator(4, "-"), separator(7, "-"), separator(10, "T"), separator(13, ":"), separator(16, ":"),
              let year = number(0..<4), let month = number(5..<7), let day = number(8..<10),
              let hour = number(11..<13), let minute = number(14..<16), let second = number(17..<19),
              (1...12).contains(month), (1...31).contains(day), hour < 24, minute < 60, second < 61 else { return nil }
        var offset = 0
        if bytes.count == 20 {
            guard separator(19, "Z") else { return nil }
        } else {
            guard separator(19, "+") || separator(19, "-"), separator(22, ":"),
                  let hours = number(20..<22), let minutes = number(23..<25), hours < 24, minutes < 60 else { return nil }
            offset = (Int(hours) * 60 + Int(minutes)) * 60 * (separator(19, "-") ? -1 : 1)
        }
        var parts = tm()
        parts.tm_year = year - 1900
        parts.tm_mon = month - 1
        parts.tm_mday = day
        parts.tm_hour = hour
        parts.tm_min = minute
        parts.tm_sec = second
        return Int(timegm(&parts)) - offset
    }

    private static func utc(_ seconds: Int) -> tm {
        var time = time_t(seconds)
        var parts = tm()
        gmtime_r(&time, &parts)
        return parts
    }

    private static func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
}
