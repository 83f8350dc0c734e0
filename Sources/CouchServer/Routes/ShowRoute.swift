import CouchCore
import CouchFunctions
import CouchStore

/// `GET|POST /db/_design/ddoc/_show/name[/docid]`: a show function renders a document (or
/// `null`: no ID, or a missing or deleted document) into any response, after CouchDB's
/// `couch_mrview_show`.
enum ShowRoute {
    static func show(_ context: RouteContext) throws -> HTTPResponse {
        let arguments = context.designFunctionArguments
        guard let name = arguments.first else {
            throw CouchError.named("show_error", "Invalid path.", status: .notFound)
        }
        let documentID = arguments.count > 1 ? arguments.dropFirst().joined(separator: "/") : nil
        let database = try context.database()
        let design = try context.designDocument(in: database)
        let document = try documentID.flatMap { try context.functionDocument(DocumentID($0), in: database) }
        let etag = Self.etag(context, design: design, documentRevision: document?.revision)
        if context.request.header("if-none-match") == etag {
            return HTTPResponse(status: 304, headers: [("ETag", etag)])
        }
        let object = try context.server.functions.show(name, design: design, database: database.name, document: document?.json,
                                                       request: context.functionRequest(id: documentID, database: database))
        var response = try FunctionResponse(object)
        response.setHeader("ETag", etag)
        response.setHeader("Vary", "Accept")
        var http = response.response
        http.setHeader("Content-Security-Policy", "sandbox")
        return http
    }

    /// CouchDB's show ETag: the design document's and the document's revisions, `Accept`
    /// and who asks; the function cannot set its own.
    static func etag(_ context: RouteContext, design: DesignDocument, documentRevision: RevisionID?, more: String = "") -> String {
        let parts = [design.revision, documentRevision?.description ?? "null", context.request.header("accept") ?? "undefined",
                     context.user.name ?? "null", context.user.roles.joined(separator: ","), more]
        return "\"" + Digest.hex(Digest.md5(Array(parts.joined(separator: "\u{0}").utf8))) + "\""
    }
}
