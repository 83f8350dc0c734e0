import CouchCore
import CouchStore

/// Everything a handler needs: the server's state, the request and its parsed endpoint.
public struct RouteContext: Sendable {
    public let server: CouchServer
    public let request: HTTPRequest
    public let endpoint: Endpoint
    /// Who is asking, as authentication found; authorization has already passed.
    public var user: UserContext = .anonymous
    /// The user's standing in the route's database, when authorization looked it up.
    var databaseAccess: DatabaseAccess?

    public var databaseName: DatabaseName {
        get throws(CouchError) {
            guard let name = endpoint.databaseName else { throw CouchError.internalError("route has no database") }
            return name
        }
    }

    public func database() throws -> Database {
        try server.databases.database(try databaseName)
    }

    public var documentID: DocumentID {
        get throws(CouchError) {
            switch endpoint {
            case .document(_, let id), .attachment(_, let id, _), .designResource(_, let id, _): return id
            default: throw CouchError.internalError("route has no document")
            }
        }
    }

    /// The request body as JSON; `bad_request` with CouchDB's reason when it is not.
    public func jsonBody() throws(CouchError) -> JSONValue {
        guard !request.body.isEmpty else { throw CouchError(.badRequest, "Request body must be a JSON object") }
        do {
            return try JSONValue.parse(request.body, maximumDepth: JSONDepth.maximumParsed)
        } catch {
            throw CouchError(.badRequest, error.message == "nesting too deep" ? JSONDepth.bodyReason : "invalid UTF-8 JSON")
        }
    }

    public func jsonObjectBody() throws(CouchError) -> JSONObject {
        guard let object = try jsonBody().objectValue else {
            throw CouchError(.badRequest, "Request body must be a JSON object")
        }
        return object
    }

    /// The body as a document's edit: its bytes kept as the stored body when they are canonical
    /// (`DocumentEdit.init(canonical:)`), parsed into values otherwise, with the same outcome.
    public func documentEditBody() throws(CouchError) -> DocumentEdit {
        if let edit = try DocumentEdit(canonical: request.body[...]) { return edit }
        return try DocumentEdit(json: jsonBody())
    }

    /// CouchDB insists on `Content-Type: application/json` for some POSTs.
    public func requireJSONContentType() throws(CouchError) {
        guard request.contentType == "application/json" else {
            throw CouchError(.badContentType, "Content-Type must be application/json")
        }
    }

    // MARK: Query parameters, read as CouchDB reads them

    /// `true`/`false` in any case (what CouchDB's view parameters accept; `requests` in Python
    /// sends `True`). Another value is a `query_parse_error` where CouchDB parses it as a view
    /// parameter (`_all_docs`, `_design_docs`); elsewhere CouchDB ignores it, and so do we.
    public func boolOption(_ name: String, default defaultValue: Bool = false) throws(CouchError) -> Bool {
        guard let value = request.queryValue(name) else { return defaultValue }
        switch value.lowercased() {
        case "true": return true
        case "false": return false
        default:
            switch endpoint {
            case .databaseResource(_, .allDocuments), .databaseResource(_, .designDocuments),
                 .databaseResource(_, .localDocuments), .partition:
                throw CouchError(.queryParseError, "Invalid boolean parameter: \"\(value)\"")
            default:
                return defaultValue
            }
        }
    }

    public func intOption(_ name: String) throws(CouchError) -> Int? {
        guard let value = request.queryValue(name) else { return nil }
        guard let int = Int(value) else {
            throw CouchError(.queryParseError, "Invalid value for integer: \"\(value)\"")
        }
        return int
    }

    public func nonNegativeIntOption(_ name: String) throws(CouchError) -> Int? {
        guard let value = try intOption(name) else { return nil }
        guard value >= 0 else {
            throw CouchError(.queryParseError, "Invalid value for positive integer: \"\(value)\"")
        }
        return value
    }

    /// A JSON-encoded query parameter (`key`, `startkey`, `open_revs`, ...).
    public func jsonOption(_ name: String) throws(CouchError) -> JSONValue? {
        guard let value = request.queryValue(name) else { return nil }
        do {
            return try JSONValue.parse(value)
        } catch {
            throw CouchError(.badRequest, "invalid UTF-8 JSON in \(name)")
        }
    }

    /// `rev` from the query string or `If-Match` (CouchDB's `extract_header_rev`: both must agree).
    public func revisionOption(ignoringIfMatch: Bool = false) throws(CouchError) -> RevisionID? {
        let explicit = try Self.revision(request.queryValue("rev"))
        guard !ignoringIfMatch else { return explicit }
        let etag = try ifMatchRevision()
        if let explicit, let etag, explicit != etag {
            throw CouchError.badRequest("Document rev and etag have different values")
        }
        return explicit ?? etag
    }

    /// The revision `If-Match` names, quotes or not.
    func ifMatchRevision() throws(CouchError) -> RevisionID? {
        try Self.revision(request.header("if-match").map { $0.trimmingCharacters(in: "\"") })
    }

    private static func revision(_ raw: String?) throws(CouchError) -> RevisionID? {
        guard let raw else { return nil }
        guard let revision = RevisionID(raw) else { throw CouchError(.badRequest, "Invalid rev format") }
        return revision
    }
}

extension String {
    func trimmingCharacters(in character: Character) -> String {
        var text = Substring(self)
        while text.first == character { text.removeFirst() }
        while text.last == character { text.removeLast() }
        return String(text)
    }
}
