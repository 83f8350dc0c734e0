import CouchCore
import CouchFunctions
import CouchStore
import Foundation

/// `GET|POST|OPTIONS /db/_design/ddoc/_list/name/view` (and `.../_list/name/other-ddoc/view`, and
/// `_all_docs` as the view): a list function renders a view's rows, read one at a time with
/// `getRow()`, into any response, after CouchDB's `couch_mrview_show:handle_view_list_req`.
/// The view is queried as a client would query it (same parameters, same errors), through
/// the server itself, so a list accepts exactly what the view accepts.
enum ListRoute {
    static func list(_ context: RouteContext) throws -> HTTPResponse {
        let arguments = context.designFunctionArguments
        guard arguments.count == 2 || arguments.count == 3 else {
            throw CouchError.named("list_error", "Bad path.", status: .notFound)
        }
        let name = arguments[0]
        var keys: JSONValue?
        if context.request.method == "POST" {
            try context.requireJSONContentType()
            keys = try context.jsonObjectBody()["keys"]
        }
        let database = try context.database()
        let design = try context.designDocument(in: database)
        let view = try viewResult(context, view: Array(arguments.dropFirst()), keys: keys)
        let etag = ShowRoute.etag(context, design: design, documentRevision: nil,
                                  more: Digest.hex(Digest.md5(view)))
        if context.request.header("if-none-match") == etag {
            return HTTPResponse(status: 304, headers: [("ETag", etag)])
        }
        let messages = try context.server.functions.list(name, design: design, database: database.name, view: view,
                                                         request: context.functionRequest(id: nil, database: database))
        return try response(messages, etag: etag)
    }

    /// The list's response from the messages the function flushed: status and headers from
    /// the last ones given before the first chunk of body, the body every chunk in order.
    private static func response(_ messages: [JSONValue], etag: String) throws(CouchError) -> HTTPResponse {
        var head = try FunctionResponse(.object([:]))
        var body: [UInt8] = []
        for message in messages {
            guard case .array(let parts) = message, parts.count >= 2 else { continue }
            if body.isEmpty, parts.count == 3 { head = try FunctionResponse(parts[2]) }
            for chunk in parts[1].arrayValue ?? [] {
                body += Array((chunk.stringValue ?? chunk.serializedString()).utf8)
            }
        }
        head.setHeader("ETag", etag)
        head.setHeader("Vary", "Accept")
        head.json = nil
        head.data = body
        var response = head.response
        response.setHeader("Content-Security-Policy", "sandbox")
        return response
    }

    /// The view's rows as its own route answers them (errors included: a missing view is
    /// the view's 404).
    private static func viewResult(_ context: RouteContext, view: [String], keys: JSONValue?) throws -> [UInt8] {
        let database = PercentEncoding.encode(context.pathParts.first ?? "")
        let viewName = view[view.count - 1]
        let path: String
        if viewName == "_all_docs" {
            path = "/\(database)/_all_docs"
        } else {
            let designName = view.count == 2 ? view[0] : (try context.documentID).nameAfterPrefix
            path = "/\(database)/_design/\(PercentEncoding.encode(designName))/_view/\(PercentEncoding.encode(viewName))"
        }
        // The list's own conditional request is not the view's.
        var headers = context.request.headers.filter { $0.key != "if-none-match" && $0.key != "if-match" }
        var body: [UInt8] = []
        var method = "GET"
        if let keys {
            method = "POST"
            body = JSONValue.object(["keys": keys]).serialized()
            headers["content-type"] = "application/json"
        }
        var request = HTTPRequest(method: method, path: path, query: context.request.query, headers: headers, body: body)
        request.rewrites = context.request.rewrites
        request.peerAddress = context.request.peerAddress
        let response = context.server.route(request)
        let bytes = try Self.body(of: response)
        guard response.status == 200 else {
            let error = try? JSONValue.parse(bytes)
            let name = error?["error"]?.stringValue ?? "unknown_error"
            throw CouchError.named(name, error?["reason"]?.stringValue ?? "", status: CouchError.Kind(rawValue: name) ?? .unknownError)
        }
        return bytes
    }

    /// A response's whole body, read from its stream when it has one.
    private static func body(of response: HTTPResponse) throws -> [UInt8] {
        switch response.body {
        case .bytes(let bytes):
            return bytes
        case .stream(let stream):
            let woken = DispatchSemaphore(value: 0)
            stream.start { woken.signal() }
            defer { stream.close() }
            var output: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 64 * 1024)
            while true {
                switch buffer.withUnsafeMutableBytes({ stream.read(into: $0) }) {
                case .data(let count): output += buffer[..<count]
                case .end: return output
                case .waiting:
                    guard woken.wait(timeout: .now() + 300) == .success else {
                        throw CouchError.internalError("the view did not answer")
                    }
                }
            }
        case .file, .deferred:
            throw CouchError.internalError("the view answered with a body a list cannot read")
        }
    }
}
