/// Checks a revision before the store writes it (design documents' `validate_doc_update`,
/// validations an embedding application registers). The store calls it with itself for every
/// write, interactive or replicated, and knows nothing of how the check is made; the function
/// runtime implements it and knows nothing of the store. The server wires the two.
public protocol DocumentValidator: Sendable {
    /// Whether any validation applies to `database` now; when none does, writes read no
    /// old documents for it.
    func validates(_ database: any FunctionDatabase) -> Bool
    /// Throws the error that refuses the write (`forbidden`, `unauthorized`, ...).
    func validate(_ write: ProposedWrite, in database: any FunctionDatabase) throws(CouchError)
    /// The writes of one request together: for each, the error that refuses it or nil.
    func validate(_ writes: [ProposedWrite], in database: any FunctionDatabase) -> [CouchError?]
}

extension DocumentValidator {
    public func validate(_ writes: [ProposedWrite], in database: any FunctionDatabase) -> [CouchError?] {
        writes.map { write -> CouchError? in
            do {
                try validate(write, in: database)
                return nil
            } catch {
                return error as? CouchError ?? CouchError(.unknownError, "\(error)")
            }
        }
    }
}

/// A revision about to be written, as CouchDB hands it to validation functions.
public struct ProposedWrite: Sendable {
    public let documentID: DocumentID
    /// `_id`, `_rev` (the parent of an interactive edit, the revision itself when
    /// replicated), the body, `_revisions` when replicated, `_deleted`, `_attachments` as stubs.
    public let newDocument: JSONObject
    /// The revision an interactive edit replaces, or a replicated revision's closest
    /// stored ancestor, in the same form; nil for none.
    public let oldDocument: JSONObject?
    /// Who writes, as CouchDB's `userCtx` says it.
    public let user: UserContext
    public let isReplicated: Bool

    public init(documentID: DocumentID, newDocument: JSONObject, oldDocument: JSONObject?, user: UserContext,
                isReplicated: Bool) {
        self.documentID = documentID
        self.newDocument = newDocument
        self.oldDocument = oldDocument
        self.user = user
        self.isReplicated = isReplicated
    }
}
