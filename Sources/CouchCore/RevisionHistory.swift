/// CouchDB's `_revisions` form of a revision's ancestry: `{"start": N, "ids": [newest, ..., oldest]}`.
public struct RevisionHistory: Sendable, Equatable {
    public let start: Int
    public let ids: [String]

    public init(start: Int, ids: [String]) {
        self.start = start
        self.ids = ids
    }

    /// From a newest-first list of consecutive revisions.
    public init(_ revisions: [RevisionID]) {
        start = revisions.first?.generation ?? 0
        ids = revisions.map(\.digest)
    }

    public var revisions: [RevisionID] {
        ids.enumerated().map { RevisionID(generation: start - $0.offset, digest: $0.element) }
    }

    /// Checked as CouchDB's `couch_doc:transfer_fields` checks it, with its reasons, and as a
    /// revision tree needs it (a non-empty list no longer than `start`).
    public init(json: JSONValue) throws(CouchError) {
        let (start, idValues) = try Self.checkForm(json)
        var ids: [String] = []
        for id in idValues.compactMap(\.stringValue) {
            guard !id.isEmpty else { throw CouchError(.badRequest, "_revisions ids must be non-empty strings") }
            // Digests as RevisionID holds them: 32 hex digits in lower case.
            ids.append(RevisionID(generation: 1, digest: id).normalizedDigest)
        }
        guard !ids.isEmpty, start >= ids.count else {
            throw CouchError(.badRequest, "_revisions.start is smaller than the number of ids")
        }
        self.start = start
        self.ids = ids
    }

    /// What CouchDB's `couch_doc:transfer_fields` checks of any document's `_revisions`: an
    /// object, an integer `start`, a list of string `ids`.
    @discardableResult
    public static func checkForm(_ json: JSONValue) throws(CouchError) -> (start: Int, ids: [JSONValue]) {
        guard let object = json.objectValue else {
            throw CouchError(.badRequest, "_revisions must be an object with integer 'start' and array 'ids'")
        }
        guard let start = object["start"]?.intValue else {
            throw CouchError(.documentValidation, "_revisions.start isn't an integer.")
        }
        guard let ids = object["ids"]?.arrayValue else {
            throw CouchError(.documentValidation, "_revisions.ids isn't a array.")
        }
        guard ids.allSatisfy({ $0.stringValue != nil }) else { throw CouchError(.documentValidation, "RevId isn't a string") }
        return (start, ids)
    }

    public var json: JSONValue {
        .object(JSONObject([("start", JSONValue(start)), ("ids", .array(ids.map { JSONValue($0) }))]))
    }
}
