import CouchCore
import CouchStore

/// `/db/doc/attachment`: one attachment of a document, read with `ETag`, `Range` and
/// gzip negotiation, and written or deleted as a new revision of the document.
enum AttachmentRoutes {
    static func getAttachment(_ context: RouteContext) throws -> HTTPResponse {
        let database = try context.database()
        guard case .attachment(_, let id, let name) = context.endpoint else { throw CouchError.notFound() }
        let snapshot = try database.document(id, revision: try context.revisionOption())
        guard var attachment = snapshot.revision.attachments.first(where: { $0.name == name }) else {
            throw CouchError.notFound("Document is missing attachment")
        }
        if attachment.isBodyAbsent {
            attachment = try context.server.attachmentsOnDemand.materialize(
                database, id: id, revision: snapshot.revision.revision, attachment: attachment)
        }
        let etag = "\"\(attachment.digest.dropFirst(4))\""
        // Ranges of the stored bytes only when they are the client's bytes, as in CouchDB.
        var headers: [(name: String, value: String)] = [("ETag", etag),
                                                        ("Accept-Ranges", attachment.encoding == nil ? "bytes" : "none")]
        if context.etagMatches(etag) {
            return HTTPResponse(status: 304, headers: headers)
        }
        headers.append(("Content-Type", attachment.contentType))
        let path = database.attachments.path(for: attachment.blobKey)
        if let encoding = attachment.encoding {
            if acceptsEncoding(encoding, context.request.header("accept-encoding")) {
                headers.append(("Content-Encoding", encoding))
                return HTTPResponse(status: 200, headers: headers, body: .file(path: path, offset: 0, length: attachment.storedLength))
            }
            // Stored compressed, asked for as is: decoded as it is sent. A length equal to the
            // stored one is unknown (inline gzip data sent without it): chunked, as in CouchDB.
            let decodedLength = attachment.length == attachment.storedLength ? nil : attachment.length
            return HTTPResponse(status: 200, headers: headers,
                                body: .stream(DecodedAttachmentStream(path: path, decodedLength: decodedLength)))
        }
        if let range = context.request.header("range") {
            switch ByteRange.parse(range, length: attachment.length) {
            case .whole:
                break
            case .unsatisfiable:
                var response = HTTPResponse.error(CouchError(.rangeNotSatisfiable, "Requested range not satisfiable"))
                response.headers.append(("Content-Range", "bytes */\(attachment.length)"))
                return response
            case .range(let lower, let upper):
                headers.append(("Content-Range", "bytes \(lower)-\(upper)/\(attachment.length)"))
                return HTTPResponse(status: 206, headers: headers,
                                    body: .file(path: path, offset: lower, length: upper - lower + 1))
            }
        }
        return HTTPResponse(status: 200, headers: headers, body: .file(path: path, offset: 0, length: attachment.length))
    }

    static func putAttachment(_ context: RouteContext) throws -> HTTPResponse {
        let database = try context.database()
        guard case .attachment(_, let id, let name) = context.endpoint else { throw CouchError.notFound() }
        try validate(name)
        let contentType = context.request.header("content-type") ?? "application/octet-stream"
        let blob: StagedBlob
        if let upload = context.request.bodySink as? BlobUploadSink {
            blob = try upload.commit()
        } else {
            blob = try database.attachments.ingest(context.request.body, compressing: database.attachments.compresses(
                contentType: contentType, encoding: nil))
        }
        let revision = try database.putAttachment(id, revision: try context.revisionOption(), name: name,
                                                  contentType: contentType, blob: blob, as: context.user)
        return .json(context.quorumStatus(201), bytes: DocumentJSON.writeResult(id: id, revision: revision),
                     headers: [("ETag", "\"\(revision)\""),
                               ("Location", context.absoluteURL(database: database.name, id: id, attachment: name))])
    }

    static func deleteAttachment(_ context: RouteContext) throws -> HTTPResponse {
        let database = try context.database()
        guard case .attachment(_, let id, let name) = context.endpoint else { throw CouchError.notFound() }
        guard let revision = try context.revisionOption() else { throw CouchError.documentConflict }
        let newRevision = try database.deleteAttachment(id, revision: revision, name: name, as: context.user)
        // 200 whatever `w` asks: CouchDB answers a removed attachment so.
        return .json(200, bytes: DocumentJSON.writeResult(id: id, revision: newRevision),
                     headers: [("ETag", "\"\(newRevision)\"")])
    }

    /// Whether `Accept-Encoding` accepts `encoding`: named, or `*`, with a weight above 0
    /// (mochiweb's `accepted_encodings`, as CouchDB asks it).
    static func acceptsEncoding(_ encoding: String, _ header: String?) -> Bool {
        guard let header else { return false }
        var wildcard = false
        for (name, weight) in HTTPRequest.weightedValues(header) {
            if name == encoding { return weight > 0 }
            if name == "*" { wildcard = weight > 0 }
        }
        return wildcard
    }

    /// CouchDB refuses attachment names it would confuse with its own resources.
    static func validate(_ name: String) throws(CouchError) {
        if name.isEmpty || name.hasBytePrefix("_") {
            throw CouchError.badRequest("Attachment name '\(name)' starts with prohibited character '_'")
        }
    }
}

/// A single `Range: bytes=…` request header, as far as Couchette serves it.
enum ByteRange: Equatable {
    case whole
    case range(Int, Int)
    case unsatisfiable

    /// Several ranges, other units or malformed headers are served whole, as RFC 9110 allows.
    static func parse(_ header: String, length: Int) -> ByteRange {
        guard header.hasPrefix("bytes="), !header.contains(",") else { return .whole }
        let spec = header.dropFirst(6).trimmingWhitespace()
        let parts = spec.split(separator: "-", maxSplits: 1, omittingEmptySubsequences: false)
        guard parts.count == 2 else { return .whole }
        if parts[0].isEmpty {
            guard let suffix = Int(parts[1]) else { return .whole }
            guard suffix > 0, length > 0 else { return .unsatisfiable }
            return .range(max(0, length - suffix), length - 1)
        }
        guard let lower = Int(parts[0]) else { return .whole }
        // `bytes=0-` asks for everything: CouchDB answers it 200, not 206.
        if lower == 0, parts[1].isEmpty { return .whole }
        guard lower < length else { return .unsatisfiable }
        guard let upper = parts[1].isEmpty ? length - 1 : Int(parts[1]) else { return .whole }
        // A backward range is refused, as CouchDB's `parse_ranges` refuses it.
        guard upper >= lower else { return .unsatisfiable }
        return .range(lower, min(upper, length - 1))
    }
}
