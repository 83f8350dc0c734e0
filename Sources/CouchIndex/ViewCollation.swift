import CouchCore

/// How a view orders its keys: CouchDB's collation (`Collation`, ICU for strings), or Erlang's
/// term order when the view's `options` say `"collation": "raw"` (`RawCollation`). The index
/// stores each view's keys as its collation's sort key, so ranges, `descending`,
/// `inclusive_end` and the stored reductions' groups all follow it.
public enum ViewCollation: Sendable {
    case unicode
    case raw

    /// The collation a view's `options` member asks for.
    public init(viewOptions: JSONValue?) {
        self = viewOptions?["collation"]?.stringValue == "raw" ? .raw : .unicode
    }

    public func sortKey(_ key: JSONValue) -> [UInt8] {
        switch self {
        case .unicode: Collation.sortKey(key)
        case .raw: RawCollation.sortKey(key)
        }
    }

    /// -1, 0 or 1.
    public func compare(_ a: JSONValue, _ b: JSONValue) -> Int {
        switch self {
        case .unicode:
            return Collation.compare(a, b)
        case .raw:
            let (x, y) = (RawCollation.sortKey(a), RawCollation.sortKey(b))
            return x == y ? 0 : (x.lexicographicallyPrecedes(y) ? -1 : 1)
        }
    }
}
