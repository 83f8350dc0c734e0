/// CouchDB's `_revisions` form of a revision's ancestry: `{"start": N, "ids": [newest, ..., oldest]}`.
/// Held as the revisions themselves, so that an MD5 digest stays 16 bytes from the stored tree to
/// the JSON written (a replication source writes one for every document it sends).
public struct RevisionHistory: Sendable, Equatable {
    /// Newest first, generations `start`, `start - 1`, ...
    public let revisions: [RevisionID]

    public var start: Int { revisions.first?.generation ?? 0 }
    public var ids: [String] { revisions.map(\.digest) }

    /// From a newest-first list of consecutive revisions.
    public init(_ revisions: [RevisionID]) {
        self.revisions = revisions
    }

    /// Checked as CouchDB's `couch_doc:transfer_fields` checks it, with its reasons, and as a
    /// revision tree needs it (a non-empty list no longer than `start`).
    public init(json: JSONValue) throws(CouchError) {
        let (start, idValues) = try Self.checkForm(json)
        let ids = idValues.compactMap(\.stringValue)
        if ids.contains(where: \.isEmpty) { throw CouchError(.badRequest, "_revisions ids must be non-empty strings") }
        guard !ids.isEmpty, start >= ids.count else {
            throw CouchError(.badRequest, "_revisions.start is smaller than the number of ids")
        }
        // Digests as a parsed revision holds them: 32 hex digits in lower case.
        revisions = ids.enumerated().map { RevisionID(generation: start - $0.offset, normalizingDigest: $0.element) }
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

    /// Appends `json`'s text without building it.
    public func write(to output: inout [UInt8]) {
        output.append(literal: #"{"start":"#)
        JSONWriter.appendInteger(start, to: &output)
        output.append(literal: #","ids":["#)
        for (index, revision) in revisions.enumerated() {
            if index > 0 { output.append(UInt8(ascii: ",")) }
            revision.appendDigestJSON(to: &output)
        }
        output.append(literal: "]}")
    }
}
