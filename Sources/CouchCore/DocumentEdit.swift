/// A document as a client sends it for writing: the body without its special
/// (`_`-prefixed) members, which are read into typed fields.
public struct DocumentEdit: Sendable {
    public var id: DocumentID?
    /// The revision this edit follows: the head of `_revisions` when given (it wins over
    /// `_rev`, as in CouchDB's `couch_doc:transfer_fields`), else `_rev`.
    public var revision: RevisionID?
    /// `_rev` as sent: what a `_local` document, which ignores `_revisions`, follows.
    public var revisionField: RevisionID?
    public var isDeleted: Bool
    /// `_revisions`, used with `new_edits=false`.
    public var history: RevisionHistory?
    /// `_attachments` as sent; interpreted by the attachment layer.
    public var attachments: JSONObject?
    /// The body's members. When it came as bytes (`init(canonical:)`), they are parsed at each
    /// read: the writer needs only `bodyBytes`; `_users`, `_replicator` and `validate_doc_update`
    /// read the members.
    public var body: JSONObject {
        get {
            guard let encodedBody else { return parsedBody }
            return (try? JSONValue.parse(encodedBody).objectValue) ?? JSONObject()
        }
        set {
            parsedBody = newValue
            encodedBody = nil
        }
    }
    private var parsedBody: JSONObject
    /// The body as stored, when it came as canonical bytes (`init(canonical:)`): what
    /// `bodyBytes` gives without writing the members again.
    private var encodedBody: [UInt8]?
    /// The nesting `encodedBody` was checked not to exceed (an object or array is one level).
    private var encodedDepthLimit = 0

    public init(id: DocumentID?, revision: RevisionID? = nil, isDeleted: Bool = false,
                history: RevisionHistory? = nil, attachments: JSONObject? = nil, body: JSONObject = JSONObject()) {
        self.id = id
        self.revision = history?.revisions.first ?? revision
        self.revisionField = revision
        self.isDeleted = isDeleted
        self.history = history
        self.attachments = attachments
        self.parsedBody = body
    }

    /// Members CouchDB accepts and ignores on input (they only appear in its output).
    static let ignoredSpecialMembers: Set<String> = ["_revs_info", "_conflicts", "_deleted_conflicts", "_local_seq"]

    /// Members the replicator writes into `_replicator` documents; CouchDB keeps them in the
    /// body of any document.
    static let replicationMembers: Set<String> = [
        "_replication_id", "_replication_state", "_replication_state_time", "_replication_state_reason",
        "_replication_stats",
    ]

    /// Members kept in the body as sent: the replicator's, and `_access` (per-document access,
    /// which CouchDB 3.4 accepts and keeps for future use: its `access-ready` feature).
    static let keptSpecialMembers = replicationMembers.union(["_access"])

    /// Reads a document object, after CouchDB's `couch_doc:transfer_fields`. `isLocal`: the
    /// document is a `_local` one whatever its `_id` says (it is named by the URL).
    public init(json: JSONValue, isLocal: Bool = false) throws(CouchError) {
        guard let object = json.objectValue else {
            throw CouchError(.badRequest, "Document must be a JSON object")
        }
        var special = SpecialMembers()
        for (key, value) in object where key.utf8.first == UInt8(ascii: "_") {
            try special.read(key, value)
        }
        // The parser's keys are unique already: keep its order, drop the special members
        // (the replicator's `_replication_*` fields and `_access` stay in the body, as in CouchDB).
        let body = object.filter { $0.key.utf8.first != UInt8(ascii: "_") || Self.keptSpecialMembers.contains($0.key) }
        try self.init(special, body: body, isLocal: isLocal)
    }

    /// Reads a document object given as bytes, as `init(json:)` reads its value, keeping the body
    /// as the bytes it came in; nil unless they are canonical (`CanonicalJSON`) and nest at most
    /// `maximumDepth` levels, for `init(json:)` to read instead. Only the special members are parsed.
    public init?(canonical bytes: ArraySlice<UInt8>, maximumDepth: Int = JSONDepth.maximumDocument) throws(CouchError) {
        let scanned = bytes.withUnsafeBufferPointer { buffer -> CanonicalDocument? in
            guard let (document, end) = CanonicalDocument.scan(buffer, from: 0, maximumDepth: maximumDepth),
                  end == buffer.count else { return nil }
            return document
        }
        guard let scanned else { return nil }
        self = try scanned.edit()
    }

    /// A canonical document object found in bytes, its special members not read yet: a request
    /// reads its documents as it checks its JSON, and their errors come after any in the JSON.
    public struct CanonicalDocument: Sendable {
        fileprivate var specialMembers: [(key: String, value: JSONValue)] = []
        fileprivate var body: [UInt8] = [_openBrace]
        fileprivate let maximumDepth: Int

        /// The object at `start` in `buffer` and where it ends; nil unless it is canonical and nests
        /// at most `maximumDepth` levels.
        public static func scan(_ buffer: UnsafeBufferPointer<UInt8>, from start: Int,
                                maximumDepth: Int = JSONDepth.maximumDocument) -> (CanonicalDocument, end: Int)? {
            guard start < buffer.count else { return nil }
            var document = CanonicalDocument(maximumDepth: maximumDepth)
            var scanner = CanonicalJSON(buffer, from: start, maximumDepth: maximumDepth)
            let canonical = scanner.passObject { key, value in
                if buffer[key.lowerBound + 1] == UInt8(ascii: "_") {
                    let name = DocumentEdit.value(buffer, key).stringValue ?? ""
                    document.specialMembers.append((name, DocumentEdit.value(buffer, value)))
                    guard DocumentEdit.keptSpecialMembers.contains(name) else { return }
                }
                if document.body.count > 1 { document.body.append(_comma) }
                document.body.append(contentsOf: UnsafeBufferPointer(rebasing: buffer[key.lowerBound..<value.upperBound]))
            }
            guard canonical else { return nil }
            document.body.append(_closeBrace)
            return (document, scanner.position)
        }

        /// The edit, its special members read as `init(json:)` reads them.
        public func edit() throws(CouchError) -> DocumentEdit {
            var special = SpecialMembers()
            for (key, value) in specialMembers { try special.read(key, value) }
            var edit = try DocumentEdit(special, body: JSONObject(), isLocal: false)
            edit.encodedBody = body
            edit.encodedDepthLimit = maximumDepth
            return edit
        }
    }

    /// The value of canonical bytes (which parse).
    private static func value(_ buffer: UnsafeBufferPointer<UInt8>, _ range: Range<Int>) -> JSONValue {
        (try? JSONValue.parse(UnsafeRawBufferPointer(UnsafeBufferPointer(rebasing: buffer[range])))) ?? .null
    }

    private init(_ special: SpecialMembers, body: JSONObject, isLocal: Bool) throws(CouchError) {
        var history: RevisionHistory?
        if let historyValue = special.history {
            // A `_local` document has no revision tree: CouchDB checks only the form of its
            // `_revisions` (its replicator writes `{"start": 0, "ids": ["1"]}` in checkpoints).
            if isLocal || special.id?.isLocal == true {
                try RevisionHistory.checkForm(historyValue)
            } else {
                history = try RevisionHistory(json: historyValue)
            }
        }
        self.init(id: special.id, revision: special.revision, isDeleted: special.isDeleted, history: history,
                  attachments: special.attachments, body: body)
    }

    /// The special members of a document as they are read, in the document's order.
    private struct SpecialMembers {
        var id: DocumentID?
        var revision: RevisionID?
        var isDeleted = false
        var history: JSONValue?
        var attachments: JSONObject?

        mutating func read(_ key: String, _ value: JSONValue) throws(CouchError) {
            switch key {
            case "_id":
                guard let raw = value.stringValue else {
                    throw CouchError(.illegalDocumentID, "Document id must be a string")
                }
                id = try DocumentID.validated(raw)
            case "_rev":
                guard let raw = value.stringValue, let parsed = RevisionID(raw) else {
                    throw CouchError(.badRequest, "Invalid rev format")
                }
                revision = parsed
            case "_deleted":
                isDeleted = value.boolValue ?? false
            case "_revisions":
                history = value
            case "_attachments":
                guard let object = value.objectValue else {
                    throw CouchError(.badRequest, "_attachments must be an object")
                }
                attachments = object
            default:
                if DocumentEdit.ignoredSpecialMembers.contains(key) || DocumentEdit.keptSpecialMembers.contains(key) {
                    return
                }
                throw CouchError(.documentValidation, "Bad special document member: \(key)")
            }
        }
    }

    /// The body as stored: compact JSON, client's key order and number text.
    public var bodyBytes: [UInt8] { encodedBody ?? JSONValue.object(parsedBody).serialized() }

    /// Whether the body nests more than `limit` levels (see `JSONDepth`).
    public func bodyNests(deeperThan limit: Int) -> Bool {
        if encodedBody != nil, limit >= encodedDepthLimit { return false }
        return JSONDepth.exceeds(.object(body), limit: limit)
    }

    /// The body as an Erlang term (`{[{Key, Value}, ...]}`, without the format's version
    /// byte): the part of the revision ID's hashed term that depends on the body alone, so it
    /// can be made before the writer and hashed there with the parent it turns out to follow.
    public var bodyTerm: [UInt8] {
        var term = ExternalTermWriter(fragment: true)
        writeBody(to: &term)
        return term.bytes
    }

    private func writeBody(to term: inout ExternalTermWriter) {
        if let encodedBody {
            encodedBody.withUnsafeBufferPointer { term.canonicalJSON($0) }
        } else {
            term.object(parsedBody)
        }
    }

    /// The revision ID this edit gets when it follows `parent`, as CouchDB computes it
    /// (`couch_db:new_revid`): the MD5 of `term_to_binary([Deleted, OldStart, OldRev, Body, Atts],
    /// [{minor_version, 1}])`, where `OldRev` is the parent's digest as CouchDB holds it (0 for a
    /// new document) and `Atts` lists `{Name, Type, MD5}` in the reverse of the document's order.
    /// The same edit made here and on Apache CouchDB gets the same ID. `bodyTerm`, when given,
    /// is this edit's `bodyTerm` made earlier.
    public func nextRevision(after parent: RevisionID?, attachments: [AttachmentInfo] = [],
                             bodyTerm: [UInt8]? = nil) -> RevisionID {
        var term = ExternalTermWriter()
        term.listHeader(5)
        term.bool(isDeleted)
        term.integer(parent?.generation ?? 0)
        if let parent { term.binary(parent.digestBinary) } else { term.integer(0) }
        if let bodyTerm { term.appendRaw(bodyTerm[...]) } else { writeBody(to: &term) }
        if attachments.isEmpty {
            term.emptyList()
        } else {
            term.listHeader(attachments.count)
            for attachment in attachments.reversed() {
                term.tupleHeader(3)
                term.binary(attachment.name)
                term.binary(attachment.contentType)
                term.binary(attachment.md5 ?? Array(attachment.digest.utf8))
            }
            term.endList()
        }
        term.endList()
        return RevisionID(generation: (parent?.generation ?? 0) + 1, md5: Digest.md5(term.bytes))
    }
}
