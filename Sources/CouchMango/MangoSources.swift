import CouchCore

/// A document as `_find` sees it: the JSON CouchDB matches and returns (with `_id`,
/// `_rev`, stubs, and `_conflicts` when asked).
public struct MangoDocument: Sendable {
    public let id: String
    public let json: JSONValue

    public init(id: String, json: JSONValue) {
        self.id = id
        self.json = json
    }
}

/// Where `_find` reads documents: the server supplies one per request, rendering
/// documents as CouchDB would show them to that user (`_users`, `_replicator` rules).
public protocol MangoDocumentSource: Sendable {
    /// Live documents other than design documents, in `_id` order (descending when asked)
    /// within `start...end` (either may be nil), after `after` (exclusive), at most `limit`.
    /// Also answers how many rows it read (design documents included).
    func scan(start: String?, end: String?, after: String?, descending: Bool, limit: Int) throws
        -> (documents: [MangoDocument], rowsRead: Int, lastID: String?)

    /// The current documents of `ids`, nil where missing, deleted or not readable.
    func documents(_ ids: [String]) throws -> [MangoDocument?]

    /// The database's update sequence (index freshness).
    var updateSequence: Int { get }
}

/// One row of a JSON index: the column values of a document, and its ID.
public struct MangoIndexRow: Sendable {
    public let key: [JSONValue]
    public let id: String

    public init(key: [JSONValue], id: String) {
        self.key = key
        self.id = id
    }

    /// View order: keys by collation, then IDs by bytes.
    static func compare(_ a: [JSONValue], _ aID: String, _ b: [JSONValue], _ bID: String) -> Int {
        let c = MangoCollation.compare(.array(a), .array(b))
        if c != 0 { return c }
        if aID == bID { return 0 }
        return Array(aID.utf8).lexicographicallyPrecedes(Array(bID.utf8)) ? -1 : 1
    }
}

/// Reads a JSON index's rows in key order. The index engine implements it; the rows of
/// an index are its documents that have every column (and pass its partial filter).
public protocol MangoIndexReader: Sendable {
    /// Rows whose key lies in `range` (inclusive), ascending or descending, strictly after
    /// `after` in that direction, at most `limit`; only `partition`'s rows when given (a
    /// partitioned index). `update`: bring the index up to date first.
    func rows(_ index: MangoIndex, in range: MangoKeyRange, descending: Bool, after: MangoIndexRow?, limit: Int,
              partition: String?, update: Bool, source: MangoDocumentSource) throws -> [MangoIndexRow]
}

extension MangoIndex {
    /// The index row of `document`, nil when it is not in the index (`mango_native_proc`'s
    /// `get_index_entries`): a missing column or a failed partial filter leaves it out.
    public func row(for document: MangoDocument) -> MangoIndexRow? {
        if document.id.hasBytePrefix("_design/") { return nil }
        if let partialSelector, !partialSelector.matches(document.json) { return nil }
        var key: [JSONValue] = []
        key.reserveCapacity(fields.count)
        for field in fields {
            guard let path = try? MangoCollation.parseField(field.name),
                  let value = MangoCollation.field(document.json, path) else { return nil }
            key.append(value)
        }
        return MangoIndexRow(key: key, id: document.id)
    }
}

extension MangoKeyRange {
    /// Whether `key` lies between the ends (`.max` above every value; a shorter end is a prefix).
    public func contains(_ key: [JSONValue]) -> Bool {
        Self.compare(key, start) >= 0 && Self.compare(key, end) <= 0
    }

    /// Compares a key with a bound as arrays collate: element by element, then by length.
    static func compare(_ key: [JSONValue], _ bound: [MangoBound]) -> Int {
        for i in 0..<min(key.count, bound.count) {
            let c = MangoBound.compare(.value(key[i]), bound[i])
            if c != 0 { return c }
        }
        return key.count == bound.count ? 0 : (key.count < bound.count ? -1 : 1)
    }
}
