import CouchCore
import CouchStore

/// `POST /db/doc` with `multipart/form-data`: the HTML form upload CouchDB 3 still accepts
/// (`chttpd_db:db_doc_req` POST). Fields: `_doc` (the document's JSON) or `_rev` (the revision
/// to start from), and `_attachments` files, each added (or replacing one of the same name).
enum FormUploadRoute {
    static func postDocument(_ context: RouteContext) throws -> HTTPResponse {
        try validateReferer(context)
        let id = try context.documentID
        let database = try context.database()
        try database.validatePartitioned(id)
        guard context.request.contentType == "multipart/form-data",
              let boundary = MultipartReader.boundary(fromContentType: context.request.header("content-type") ?? "") else {
            throw CouchError(.badContentType, "Content-Type must be multipart/form-data")
        }
        let form = FormCollector()
        do {
            let reader = MultipartReader(boundary: boundary, delegate: form)
            try reader.append(context.request.body)
            try reader.finish()
        } catch let error as MultipartError {
            throw CouchError.badRequest(error.reason)
        }
        var document: JSONObject
        if let text = form.fields.first(where: { $0.name == "_doc" }) {
            guard let object = try? JSONValue.parse(text.value).objectValue else {
                throw CouchError.badRequest("invalid UTF-8 JSON in the _doc field")
            }
            document = object
        } else {
            let revision = form.fields.first(where: { $0.name == "_rev" })
                .flatMap { RevisionID(String(decoding: $0.value, as: UTF8.self)) }
            let snapshot = try database.document(id, revision: revision)
            guard let body = try JSONValue.parse(snapshot.revision.body).objectValue else {
                throw CouchError.internalError("stored body is not an object")
            }
            document = body
            document["_rev"] = JSONValue(snapshot.revision.revision.description)
            var attachments = JSONObject()
            for attachment in snapshot.revision.attachments { attachments[attachment.name] = ["stub": true] }
            if !attachments.isEmpty { document["_attachments"] = .object(attachments) }
        }
        var attachments = document["_attachments"]?.objectValue ?? JSONObject()
        for file in form.files {
            try AttachmentRoutes.validate(file.name)
            attachments[file.name] = ["content_type": JSONValue(file.contentType), "data": JSONValue(Base64.encode(file.data))]
        }
        if !attachments.isEmpty { document["_attachments"] = .object(attachments) }
        var edit = try DocumentEdit(json: .object(document))
        edit.id = id
        edit = try context.authorizedEdit(edit, in: database)
        let revision = try database.update(edit, as: context.user)
        return .json(201, bytes: DocumentJSON.writeResult(id: id, revision: revision), headers: [("ETag", "\"\(revision)\"")])
    }

    /// CouchDB's `validate_referer`: a form post must come from a page of this host.
    private static func validateReferer(_ context: RouteContext) throws(CouchError) {
        guard let referer = context.request.header("referer") else {
            throw CouchError.badRequest("Referer header required.")
        }
        let host = context.request.header(context.server.configuration.forwardedHostHeader) ?? context.request.header("host")
        let afterScheme = referer.range(of: "://").map { referer[$0.upperBound...] } ?? Substring(referer)
        let refererHost = afterScheme.prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        guard let host, refererHost == host else { throw CouchError.badRequest("Referer header must match host.") }
    }
}

/// The fields and files of a `multipart/form-data` body, collected in memory.
private final class FormCollector: MultipartReader.Delegate {
    var fields: [(name: String, value: [UInt8])] = []
    var files: [(name: String, contentType: String, data: [UInt8])] = []
    private var current: (name: String?, filename: String?, contentType: String)?
    private var data: [UInt8] = []

    func beginPart(headers: [String: String]) throws {
        let disposition = headers["content-disposition"] ?? ""
        current = (Self.parameter("name", in: disposition), Self.parameter("filename", in: disposition),
                   headers["content-type"] ?? "application/octet-stream")
        data = []
    }

    func partData(_ bytes: ArraySlice<UInt8>) throws { data.append(contentsOf: bytes) }

    func endPart() throws {
        guard let current, let name = current.name else { return }
        if name == "_attachments", let filename = current.filename {
            files.append((filename, current.contentType, data))
        } else {
            fields.append((name, data))
        }
    }

    /// `name="value"` (or unquoted) in a `Content-Disposition`.
    static func parameter(_ key: String, in disposition: String) -> String? {
        for part in disposition.split(separator: ";") {
            let pair = part.split(separator: "=", maxSplits: 1)
            guard pair.count == 2, pair[0].trimmingWhitespace() == key else { continue }
            var value = pair[1].trimmingWhitespace()
            if value.hasPrefix("\""), value.hasSuffix("\""), value.count >= 2 { value = String(value.dropFirst().dropLast()) }
            return value
        }
        return nil
    }
}
