import CouchCore

/// A `_bulk_get` answer read in one pass: each document found is checked valid and kept as the
/// JSON it came in (`ReplicatedRevision.sourceJSON`), with only its `_id`, `_rev` and
/// `_attachments` read, so a remote target gets it without its being parsed and written again.
enum BulkGetAnswer {
    /// The results in the answer's order; nil if the answer cannot be read.
    static func results(_ body: [UInt8]) -> [FetchResult]? {
        let bytes = body[...]
        return try? JSONCursor.read(bytes) { cursor throws(JSONParseError) -> [FetchResult] in
            var fetched: [FetchResult] = []
            var sawResults = false
            try cursor.enterObject()
            while let key = try cursor.nextMember() {
                guard key == "results" else {
                    _ = try cursor.skipValue()
                    continue
                }
                sawResults = true
                try cursor.enterArray()
                while try cursor.nextElement() {
                    try readResult(&cursor, in: bytes, into: &fetched)
                }
            }
            guard sawResults else { throw JSONParseError(offset: 0, message: "no results member") }
            return fetched
        }
    }

    private enum Entry {
        case found(ReplicatedRevision)
        case error(JSONValue)
    }

    /// One `{"id": ..., "docs": [...]}`; `id` may come after `docs`.
    private static func readResult(_ cursor: inout JSONCursor, in bytes: ArraySlice<UInt8>,
                                   into fetched: inout [FetchResult]) throws(JSONParseError) {
        var id = ""
        var entries: [Entry] = []
        try cursor.enterObject()
        while let key = try cursor.nextMember() {
            switch key {
            case "id":
                id = try cursor.readValue().stringValue ?? ""
            case "docs":
                try cursor.enterArray()
                while try cursor.nextElement() {
                    try cursor.enterObject()
                    while let key = try cursor.nextMember() {
                        switch key {
                        case "ok":
                            if let revision = try readDocument(&cursor, in: bytes) { entries.append(.found(revision)) }
                        case "error":
                            entries.append(.error(try cursor.readValue()))
                        default:
                            _ = try cursor.skipValue()
                        }
                    }
                }
            default:
                _ = try cursor.skipValue()
            }
        }
        for entry in entries {
            switch entry {
            case .found(let revision):
                fetched.append(.found(revision))
            case .error(let error):
                let revision = error["rev"]?.stringValue.flatMap(RevisionID.init)
                if error["error"]?.stringValue == "not_found", let revision {
                    fetched.append(.missing(DocumentID(id), revision))
                } else {
                    fetched.append(.failed(DocumentID(id), revision, error["error"]?.stringValue ?? "error"))
                }
            }
        }
    }

    /// A document object, read as far as its `_id`, `_rev` and `_attachments`; nil if it has no
    /// valid `_id` and `_rev` (as an unreadable entry, it is left out).
    private static func readDocument(_ cursor: inout JSONCursor, in bytes: ArraySlice<UInt8>) throws(JSONParseError) -> ReplicatedRevision? {
        let start = cursor.valueStart()
        guard start < bytes.endIndex, bytes[start] == UInt8(ascii: "{") else {
            _ = try cursor.skipValue()
            return nil
        }
        cursor.skippedSurrogateEscape = false
        var id: String?
        var revision: RevisionID?
        var hasAttachments = false
        try cursor.enterObject()
        while let key = try cursor.nextMember() {
            switch key {
            case "_id": id = try cursor.readValue().stringValue
            case "_rev": revision = try cursor.readValue().stringValue.flatMap(RevisionID.init)
            case "_attachments": hasAttachments = !(try cursor.readValue().objectValue?.isEmpty ?? true)
            default: _ = try cursor.skipValue()
            }
        }
        let json = bytes[start..<cursor.position]
        if cursor.skippedSurrogateEscape {
            // Parsing decodes a lone surrogate to U+FFFD: the target gets the parsed document,
            // as it would have before documents were passed on as they came.
            guard let object = try JSONValue.parse(json).objectValue else { return nil }
            var parsed = ReplicatedRevision(document: object)
            parsed?.encodedSize = json.count
            return parsed
        }
        guard let id, let revision else { return nil }
        return ReplicatedRevision(id: DocumentID(id), revision: revision, json: json, hasAttachments: hasAttachments)
    }
}
