import CouchCore
import CouchFunctions
import CouchStore

/// `PUT|POST /db/_design/ddoc/_update/name[/docid]`: an update function answers
/// `[doc, response]`; a `doc` object is written through the ordinary write path (size
/// limits, design-document rights, `validate_doc_update`, conflicts) before the response
/// is sent with `201`, `X-Couch-Id` and `X-Couch-Update-NewRev`. After CouchDB's
/// `couch_mrview_show:send_doc_update_response`.
enum UpdateRoute {
    static func update(_ context: RouteContext) throws -> HTTPResponse {
        let arguments = context.designFunctionArguments
        guard let name = arguments.first else {
            throw CouchError.named("update_error", "Invalid path.", status: .notFound)
        }
        let documentID = arguments.count > 1 ? arguments.dropFirst().joined(separator: "/") : nil
        let database = try context.database()
        let design = try context.designDocument(in: database)
        let document = try documentID.flatMap { try context.functionDocument(DocumentID($0), in: database) }
        let result = try context.server.functions.update(name, design: design, database: database.name, document: document?.json,
                                                         request: context.functionRequest(id: documentID, database: database))
        guard case .object = result.document else {
            return try FunctionResponse(result.response).response
        }
        var edit = try DocumentEdit(json: result.document)
        edit.id = try DocumentID.validated(edit.id?.rawValue ?? "")
        edit = try context.authorizedEdit(edit, in: database)
        let revision = try database.update(edit, as: context.user)
        // CouchDB puts `code: 201` first: a `code` of the function's own wins.
        var response = try FunctionResponse(result.response)
        if !Self.setsCode(result.response) { response.code = 201 }
        response.setHeader("X-Couch-Update-NewRev", revision.description)
        response.setHeader("X-Couch-Id", PercentEncoding.encode(edit.id?.rawValue ?? ""))
        return response.response
    }

    private static func setsCode(_ response: JSONValue) -> Bool {
        if case .object(let members) = response { return members["code"] != nil }
        return false
    }
}
