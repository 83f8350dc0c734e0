import CouchCore

/// Dates as HTTP writes them (`Date`, `Expires`): `Thu, 01 Jan 1970 00:00:00 GMT`.
enum HTTPDate {
    private static let text = TextEachSecond { Timestamp.rfc1123(Int($0)) }

    /// The current time, formatted at most once a second for every response of that second.
    static func now() -> String { text.now() }
}
