import CouchCore
import CouchFunctions
import CouchStore

/// `ANY /db/_design/ddoc/_rewrite/path`: the design document's `rewrites` (an array of
/// rules, or a function's source) turn the request into another one, relative to the design
/// document, which is then served as if it had been sent (authentication and authorization
/// included), after CouchDB's `chttpd_rewrite`. `rewrite_limit` (100) bounds how many
/// rewrites one request may go through; `secure_rewrites` (true) refuses rules that climb
/// above the database. Both are read from `[chttpd]`, then `[httpd]`, as CouchDB reads them.
enum RewriteRoute {
    static func rewrite(_ context: RouteContext) throws -> HTTPResponse {
        let limit = context.server.configuration.chttpdValue("rewrite_limit").flatMap { Int($0) } ?? 100
        guard context.request.rewrites < limit else { throw CouchError.badRequest("Exceeded rewrite recursion limit") }
        let database = try context.database()
        let design = try context.designDocument(in: database)
        switch design.rewrites {
        case .array(let rules)?:
            let secure = context.server.configuration.chttpdValue("secure_rewrites") != "false"
            let rewriter = try RewriteRules(rules, secure: secure)
            guard let target = try rewriter.target(method: context.request.method, path: context.designFunctionArguments,
                                                   query: try Self.queryBindings(context.request.query)) else {
                throw CouchError.notFound("missing")
            }
            return dispatch(context, path: Self.prefix(context) + "/" + target, method: context.request.method,
                            headers: context.request.headers, body: context.request.body)
        case .string(let source)?:
            return try rewriteByFunction(context, design: design, database: database, source: source)
        default:
            throw CouchError.named("rewrite_error", "Invalid path.", status: .notFound)
        }
    }

    /// A rewrite function's answer: a response of its own (`code`), or a new request.
    private static func rewriteByFunction(_ context: RouteContext, design: DesignDocument, database: Database,
                                          source: String) throws -> HTTPResponse {
        var request = context.functionRequest(id: nil, database: database)
        // CouchDB's rewrite functions see `req` without `info`, `uuid`, `id` and `form`.
        if case .object(let fields) = request {
            request = .object(fields.filter { !["info", "uuid", "id", "form"].contains($0.key) })
        }
        let answer = try context.server.functions.rewrite(design: design, database: database.name, source: source, request: request)
        guard case .array(let parts) = answer, let status = parts.first?.stringValue else {
            throw CouchError(.unknownError, answer.serializedString())
        }
        if status == "no_dispatch_rule" { throw CouchError.named("rewrite_error", "Invalid path.", status: .notFound) }
        guard status == "ok", parts.count == 2, case .object(let rewrite) = parts[1] else {
            throw CouchError.named("rewrite_error", "bad rewrite")
        }
        try validate(rewrite)
        let body = rewrite["body"]?.stringValue.map { Array($0.utf8) } ?? context.request.body
        var headers = context.request.headers
        for (name, value) in rewrite["headers"]?.objectValue ?? JSONObject() { headers[name.lowercased()] = value.stringValue ?? "" }
        if let code = rewrite["code"]?.intValue {
            let responseHeaders = (rewrite["headers"]?.objectValue ?? JSONObject()).map { ($0.key, $0.value.stringValue ?? "") }
                .filter { !FunctionResponse.framingHeaders.contains($0.0.lowercased()) }
            return HTTPResponse(status: code, headers: responseHeaders, body: .bytes(body))
        }
        guard let path = rewrite["path"]?.stringValue else {
            throw CouchError.named("rewrite_error", "Rewrite result must produce a new path.")
        }
        let query: [(String, String)] = rewrite["query"]?.objectValue.map { $0.map { ($0.key, $0.value.stringValue ?? "") } }
            ?? context.request.query.map { ($0.name, $0.value) }
        let encoded = query.map { PercentEncoding.encode($0.0) + "=" + PercentEncoding.encode($0.1) }.joined(separator: "&")
        return dispatch(context, path: Self.prefix(context) + "/" + path + (encoded.isEmpty ? "" : "?" + encoded),
                        method: rewrite["method"]?.stringValue ?? context.request.method, headers: headers, body: body)
    }

    /// CouchDB's checks of a rewrite function's answer (`couch_query_servers:validate_rewrite_response`).
    private static func validate(_ rewrite: JSONObject) throws(CouchError) {
        for (key, value) in rewrite {
            let valid: Bool = switch key {
            case "method", "path", "body": value.stringValue != nil
            case "headers", "query": value.objectValue.map { $0.allSatisfy { $0.value.stringValue != nil } } ?? false
            case "code": value.intValue.map { $0 >= 200 && $0 < 600 } ?? false
            default: true
            }
            if !valid { throw CouchError.named("rewrite_error", "bad \(key)") }
        }
    }

    /// `/db/_design/ddoc`, percent-encoded: where relative rewrite targets start.
    private static func prefix(_ context: RouteContext) -> String {
        let parts = context.pathParts
        let database = parts.first ?? ""
        let design = (try? context.documentID.nameAfterPrefix) ?? ""
        return "/" + PercentEncoding.encode(database) + "/_design/" + PercentEncoding.encode(design)
    }

    /// The request's query parameters as rule bindings; CouchDB reads the JSON ones as JSON.
    private static func queryBindings(_ query: [(name: String, value: String)]) throws(CouchError) -> [(String, JSONValue)] {
        try query.map { parameter throws(CouchError) -> (String, JSONValue) in
            guard RewriteRules.jsonParameters.contains(parameter.name) else { return (parameter.name, JSONValue(parameter.value)) }
            do {
                return (parameter.name, try JSONValue.parse(Array(parameter.value.utf8)))
            } catch {
                throw CouchError.badRequest("invalid UTF-8 JSON in \(parameter.name)")
            }
        }
    }

    /// Serves the rewritten request through the whole server, one rewrite deeper.
    private static func dispatch(_ context: RouteContext, path target: String, method: String,
                                 headers: [String: String], body: [UInt8]) -> HTTPResponse {
        let split = target.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
        let path = RewriteRules.normalize(String(split[0]))
        var query: [(name: String, value: String)] = []
        if split.count == 2 {
            for pair in split[1].split(separator: "&") where !pair.isEmpty {
                let halves = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                let name = PercentDecoding.decode(halves[0], plusIsSpace: true) ?? String(halves[0])
                let value = halves.count == 2 ? (PercentDecoding.decode(halves[1], plusIsSpace: true) ?? String(halves[1])) : ""
                query.append((name, value))
            }
        }
        var request = HTTPRequest(method: method, path: path, query: query, headers: headers, body: body)
        request.rewrites = context.request.rewrites + 1
        request.peerAddress = context.request.peerAddress
        return context.server.route(request)
    }
}

extension ServerConfiguration {
    /// A configuration value Couchette does not interpret itself (`[httpd] rewrite_limit`).
    func otherValue(_ key: String, in section: String) -> String? {
        otherEntries.last { $0.section == section && $0.key == key }?.value
    }

    /// `[chttpd] key`, else `[httpd] key` (CouchDB's `chttpd_util:get_chttpd_config`).
    func chttpdValue(_ key: String) -> String? {
        otherValue(key, in: "chttpd") ?? otherValue(key, in: "httpd")
    }
}
