/// A document as a client sends it for writing: the body without its special
/// (`_`-prefixed) members, which are read into typed fields.
public struct DocumentEdit: Sendable {
    public var id: DocumentID?
    public var revision: RevisionID?
    public var isDeleted: Bool
    /// `_revisions`, used with `new_edits=false`.
    public var history: RevisionHistory?
    /// `_attachments` as sent; interpreted by the attachment layer.
    public var attachments: JSONObject?
    public var body: JSONObject

    public init(id: DocumentID?, revision: RevisionID? = nil, isDeleted: Bool = false,
                history: RevisionHistory? = nil, attachments: JSONObject? = nil, body: JSONObject = JSONObject()) {
        self.id = id
        self.revision = revision
        self.isDeleted = isDeleted
        self.history = history
        self.attachments = attachments
        self.body = body
    }

    /// Members CouchDB accepts and ignores on input (they only appear in its output).
    static let ignoredSpecialMembers: Set<String> = ["_revs_info", "_conflicts", "_deleted_conflicts", "_local_seq"]

    /// Reads a document object, after CouchDB's `couch_doc:transfer_fields`. In a
    /// replicator database (`keepingReplicationFields`) the `_replication_*` members the
    /// replicator writes are kept in the body, as CouchDB keeps them.
    public init(json: JSONValue, keepingReplicationFields: Bool = false) throws(CouchError) {
        guard let object = json.objectValue else {
            throw CouchError(.badRequest, "Document must be a JSON object")
        }
        var id: DocumentID?
        var revision: RevisionID?
        var isDeleted = false
        var history: RevisionHistory?
        var attachments: JSONObject?
        for (key, value) in object where key.utf8.first == UInt8(ascii: "_") {
            switch key {
            case "_id":
                guard let raw = value.stringValue else {
                    throw CouchError(.badRequest, "Document id must be a string")
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
                history = try RevisionHistory(json: value)
            case "_attachments":
                guard let attachmentObject = value.objectValue else {
                    throw CouchError(.badRequest, "_attachments must be an object")
                }
                attachments = attachmentObject
            default:
                if Self.ignoredSpecialMembers.contains(key) { continue }
                if keepingReplicationFields, key.hasPrefix("_replication_") { continue }
                throw CouchError(.documentValidation, "Bad special document member: \(key)")
            }
        }
        // The parser's keys are unique already: keep its order, drop the special members.
        let body = object.filter {
            $0.key.utf8.first != UInt8(ascii: "_") || (keepingReplicationFields && $0.key.hasPrefix("_replication_"))
        }
        self.init(id: id, revision: revision, isDeleted: isDeleted, history: history,
                  attachments: attachments, body: body)
    }

    /// The body as stored: compact JSON, client's key order and number text.
    public var bodyBytes: [UInt8] { JSONValue.object(body).serialized() }

    /// The revision ID this edit gets when it follows `parent`: deterministic, so the
    /// same edit made on two nodes has the same ID.
    public func nextRevision(after parent: RevisionID?, attachmentDigests: [String] = []) -> RevisionID {
        var input: [UInt8] = Array((parent?.description ?? "").utf8)
        input.append(0)
        input.append(isDeleted ? 1 : 0)
        input.append(0)
        input.append(contentsOf: JSONValue.object(body).canonicalBytes)
        for digest in attachmentDigests.sorted() {
            input.append(0)
            input.append(contentsOf: digest.utf8)
        }
        return RevisionID(generation: (parent?.generation ?? 0) + 1, digest: Digest.hex(Digest.md5(input)))
    }
}
