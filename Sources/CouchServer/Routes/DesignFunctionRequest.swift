import CouchCore
import CouchFunctions
import CouchStore

/// The design-document functions served over HTTP: `_show`, `_list`, `_update`, `_rewrite`.
enum DesignFunctionRoute: String, Hashable, Sendable {
    case show = "_show"
    case list = "_list"
    case update = "_update"
    case rewrite = "_rewrite"
}

extension RouteContext {
    /// The request path's segments, each percent-decoded (CouchDB's `path_parts`).
    var pathParts: [String] {
        request.path.split(separator: "/").compactMap { PercentDecoding.decode($0, plusIsSpace: false) }
    }

    /// The segments after `/db/_design/ddoc/_show` (or `_list`, ...): the function's name, a
    /// document ID (which may hold `/`), a view.
    var designFunctionArguments: [String] {
        let parts = pathParts
        // `/db/_design/ddoc/_show/...`, or `/db/_design%2Fddoc/_show/...`
        let resourceIndex = parts.count > 1 && parts[1] == "_design" ? 3 : 2
        return parts.count > resourceIndex + 1 ? Array(parts[(resourceIndex + 1)...]) : []
    }

    /// CouchDB's `req` object for a show, list or update function (`chttpd_external:json_req_obj`).
    func functionRequest(id: String?, database: Database) -> JSONValue {
        functionRequestFields(id: id).json(database: database, securityObject: server.functions.securityObject(of: database))
    }

    func functionRequestFields(id: String?) -> FilterRequest {
        var req = FilterRequest(path: pathParts, user: user)
        req.id = id
        req.method = request.method
        let queryString = request.query.map { PercentEncoding.encode($0.name) + "=" + PercentEncoding.encode($0.value) }
        req.rawPath = request.path + (queryString.isEmpty ? "" : "?" + queryString.joined(separator: "&"))
        var query = JSONObject()
        for parameter in request.query {
            // CouchDB decodes these as JSON in `req.query`.
            if ["key", "startkey", "endkey", "descending"].contains(parameter.name),
               let value = try? JSONValue.parse(Array(parameter.value.utf8)) {
                query[parameter.name] = value
            } else {
                query[parameter.name] = JSONValue(parameter.value)
            }
        }
        req.query = query
        var headers = JSONObject()
        for (name, value) in request.headers.sorted(by: { $0.key < $1.key }) { headers[Self.headerName(name)] = JSONValue(value) }
        req.headers = headers
        if !request.body.isEmpty || request.method == "POST" || request.method == "PUT" {
            req.body = String(decoding: request.body, as: UTF8.self)
        }
        if let cookies = request.header("cookie") {
            var parsed = JSONObject()
            for pair in cookies.split(separator: ";") {
                let parts = pair.split(separator: "=", maxSplits: 1)
                if parts.count == 2 { parsed[parts[0].trimmingWhitespace()] = JSONValue(String(parts[1])) }
            }
            req.cookie = parsed
        }
        if request.contentType == "application/x-www-form-urlencoded", request.method == "POST" || request.method == "PUT" {
            var form = JSONObject()
            for pair in String(decoding: request.body, as: UTF8.self).split(separator: "&") {
                let parts = pair.split(separator: "=", maxSplits: 1)
                guard let key = PercentDecoding.decode(parts[0], plusIsSpace: true) else { continue }
                form[key] = JSONValue(parts.count == 2 ? (PercentDecoding.decode(parts[1], plusIsSpace: true) ?? "") : "")
            }
            req.form = form
        }
        return req
    }

    /// Header names as CouchDB's `req.headers` shows them (`Content-Type`): the listener
    /// keeps them in lower case, so each word is capitalised.
    static func headerName(_ name: String) -> String {
        name.split(separator: "-", omittingEmptySubsequences: false).map { $0.prefix(1).uppercased() + $0.dropFirst() }
            .joined(separator: "-")
    }

    /// The design document the route names, with CouchDB's 404 when it is missing.
    func designDocument(in database: Database) throws -> DesignDocument {
        try server.functions.designDocument(try documentID, in: database)
    }

    /// A document as show and update functions receive it (`_revisions`, `_conflicts`,
    /// attachment stubs), or nil when it is missing or deleted.
    func functionDocument(_ id: DocumentID, in database: Database) throws -> (json: [UInt8], revision: RevisionID)? {
        // The system databases' read rules hold here too (`DocumentReadRule`): another user's
        // `_users` document is missing, replication credentials are hidden.
        var options = DocumentRenderOptions(reader: try documentReadRule(for: database))
        options.revisions = true
        options.conflicts = true
        do {
            let snapshot = try database.document(id)
            return (try DocumentJSON.render(snapshot.revision, record: snapshot.record, options: options),
                    snapshot.revision.revision)
        } catch let error as CouchError where error.kind == .notFound {
            return nil
        }
    }
}
