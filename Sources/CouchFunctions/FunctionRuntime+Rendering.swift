import CouchCore

/// Show, list, update and rewrite functions: each call answers what CouchDB's query server
/// answers (a response object, `[doc, response]`, list chunks, a rewrite), as JSON for the
/// server to turn into HTTP. Errors the function names (`["error", name, reason]`,
/// `{error, reason}`) keep their name and, for the names CouchDB maps to a status
/// (`not_found`, `forbidden`, `not_acceptable`, ...), that status.
extension FunctionRuntime {
    /// The design document `id` of `database`; CouchDB's 404 (`missing`, `deleted`) when absent.
    public func designDocument(_ id: DocumentID, in database: any FunctionDatabase) throws(CouchError) -> DesignDocument {
        if let design = try designDocuments(database).first(where: { $0.id == id }) { return design }
        throw database.readError(id)
    }

    /// A show function's response object (`{body|json|base64, code, headers}`). `document`
    /// is the document's JSON (nil: `null`, no document or a missing one).
    public func show(_ name: String, design: DesignDocument, database: DatabaseName,
                     document: [UInt8]?, request: JSONValue) throws(CouchError) -> JSONValue {
        let source = try Self.source(design.shows[name], member: "shows", name: name, design: design)
        let key = design.key(.show, name, database: database)
        return try render(key: key, source: source, design: design, database: database, driver: "runShow",
                          arguments: [document ?? Array("null".utf8), request.serialized()])
    }

    /// An update function's `[doc, response]`: `doc` is null when nothing is to be written.
    public func update(_ name: String, design: DesignDocument, database: DatabaseName,
                       document: [UInt8]?, request: JSONValue) throws(CouchError) -> (document: JSONValue, response: JSONValue) {
        let source = try Self.source(design.updates[name], member: "updates", name: name, design: design)
        let key = design.key(.update, name, database: database)
        let result = try render(key: key, source: source, design: design, database: database, driver: "runUpdate",
                                arguments: [document ?? Array("null".utf8), request.serialized()])
        guard case .array(let pair) = result, pair.count == 2 else {
            throw CouchError.named("render_error", "undefined response from update function")
        }
        return (pair[0], pair[1])
    }

    /// A list function run over a view's answer (its JSON: `total_rows`, `offset`,
    /// `update_seq`, `rows`, parsed once in the engine): the messages it flushed, in order
    /// (`["start", chunks, response]`, `["chunks", chunks(, response)]`, `["end", chunks(, response)]`).
    public func list(_ name: String, design: DesignDocument, database: DatabaseName, view: [UInt8],
                     request: JSONValue) throws(CouchError) -> [JSONValue] {
        let source = try Self.source(design.lists[name], member: "lists", name: name, design: design)
        let key = design.key(.list, name, database: database)
        let result = try render(key: key, source: source, design: design, database: database, driver: "runList",
                                arguments: [view, request.serialized()])
        guard case .array(let messages) = result else {
            throw CouchError.named("render_error", "undefined response from list function")
        }
        return messages
    }

    /// A rewrite function's answer: `["ok", {path, method, query, headers, body, code}]` or
    /// `["no_dispatch_rule"]`.
    public func rewrite(design: DesignDocument, database: DatabaseName, source: String,
                        request: JSONValue) throws(CouchError) -> JSONValue {
        let key = design.key(.rewrite, "rewrites", database: database)
        return try render(key: key, source: source, design: design, database: database, driver: "runRewrite",
                          arguments: [request.serialized()])
    }

    private static func source(_ source: String?, member: String, name: String, design: DesignDocument) throws(CouchError) -> String {
        guard let source else {
            throw CouchError.notFound("missing \(member) function \(name) on design doc \(design.id.rawValue)")
        }
        return source
    }

    /// Calls `__couchette.<driver>(function, ddoc, ...arguments)` and reads back its value.
    private func render(key: String, source: String, design: DesignDocument, database: DatabaseName, driver: String,
                        arguments: [[UInt8]]) throws(CouchError) -> JSONValue {
        let call = FunctionWorkerProtocol.Call(driver: driver, functions: [.init(key: key, source: source, design: design.json)],
                                               arguments: [design.json] + arguments)
        do {
            return try self.call(call, owner: database) ?? .null
        } catch let error {
            throw Self.withStatus(error)
        }
    }

    /// A function's named error with the status CouchDB gives that name (`chttpd:error_info`).
    static func withStatus(_ error: CouchError) -> CouchError {
        guard let name = error.customName, let kind = CouchError.Kind(rawValue: name),
              CouchError(kind, "").status < 500 else { return error }
        return CouchError(kind, error.reason)
    }
}
