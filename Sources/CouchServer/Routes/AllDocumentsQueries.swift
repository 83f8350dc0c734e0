import CouchCore

/// `POST /db/_all_docs/queries` and `/db/_design_docs/queries`: several listings in one
/// request, `{"queries": [{...}, ...]}` answering `{"results": [...]}`, each entry's members
/// read as that listing's query parameters.
extension AllDocumentsRoute {
    static func postAllDocumentsQueries(_ context: RouteContext) throws -> HTTPResponse {
        try queries(context, designOnly: false)
    }

    static func postDesignDocumentsQueries(_ context: RouteContext) throws -> HTTPResponse {
        try queries(context, designOnly: true)
    }

    private static func queries(_ context: RouteContext, designOnly: Bool) throws -> HTTPResponse {
        try context.requireJSONContentType()
        guard case .array(let entries)? = try context.jsonObjectBody()["queries"] else {
            throw CouchError(.queryParseError, "`queries` member must be an array of objects")
        }
        var output: [UInt8] = Array(#"{"results":["#.utf8)
        for (position, entry) in entries.enumerated() {
            guard case .object(let parameters) = entry else {
                throw CouchError(.queryParseError, "`queries` member must be an array of objects")
            }
            // The entry as a query string, so one listing reads its parameters one way.
            var query = context.request.query.filter { parameter in !parameters.contains(parameter.name) }
            for (name, value) in parameters {
                let text: String
                switch name {
                case "key", "keys", "startkey", "start_key", "endkey", "end_key": text = value.serializedString()
                default: text = value.stringValue ?? value.serializedString()
                }
                query.append((name, text))
            }
            let request = HTTPRequest(method: "GET", path: context.request.path, query: query,
                                      headers: context.request.headers, body: [])
            let endpoint = Endpoint.databaseResource(try context.databaseName, designOnly ? .designDocuments : .allDocuments)
            let listing = RouteContext(server: context.server, request: request, endpoint: endpoint,
                                       user: context.user, databaseAccess: context.databaseAccess)
            let response = try respond(listing, namespace: designOnly ? .design : .all)
            if position > 0 { output.append(UInt8(ascii: ",")) }
            var bytes = drain(response.body)
            while let last = bytes.last, last == UInt8(ascii: "\n") || last == UInt8(ascii: " ") { bytes.removeLast() }
            output += bytes
        }
        output += Array("]}\n".utf8)
        return .json(200, bytes: output)
    }

    /// A listing's whole body (it streams page by page otherwise).
    private static func drain(_ body: HTTPResponse.Body) -> [UInt8] {
        switch body {
        case .bytes(let bytes): return bytes
        case .stream(let stream):
            var bytes: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 64 * 1024)
            while true {
                let chunk = buffer.withUnsafeMutableBytes { stream.read(into: $0) }
                guard case .data(let count) = chunk else { break }
                bytes += buffer[..<count]
            }
            stream.close()
            return bytes
        case .file, .deferred: return []
        }
    }
}
