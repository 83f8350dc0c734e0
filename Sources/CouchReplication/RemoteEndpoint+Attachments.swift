import CouchCore
import CurlClient

/// The attachment road over HTTP, as CouchDB's replicator travels it.
extension RemoteEndpoint {
    public func attachmentSpool() throws(ReplicationError) -> any AttachmentSpool {
        TemporaryFileSpool()
    }

    /// `GET /db/doc?revs=true&open_revs=[...]&latest=true&attachments=true&atts_since=[...]`
    /// with `Accept: multipart/mixed`, read as it arrives (`OpenRevisionsReader`). A body
    /// cut short is fetched again, as a failed request is.
    public func revisionsWithAttachments(_ id: DocumentID, _ revisions: [RevisionID], attachmentsSince: [RevisionID],
                                         spool: any AttachmentSpool) async throws(ReplicationError) -> [AttachedRevision] {
        var query: [(String, String)] = [
            ("revs", "true"), ("open_revs", Self.revisionList(revisions)), ("latest", "true"), ("attachments", "true"),
        ]
        if !attachmentsSince.isEmpty {
            // The newest ancestors decide what is sent; a long list only makes the URL long.
            let newest = attachmentsSince.sorted { $0.generation > $1.generation }.prefix(Self.maximumAttachmentsSince)
            query.append(("atts_since", Self.revisionList(Array(newest))))
        }
        var backoff = Backoff.request
        while true {
            let response = try await stream("GET", URLEncoding.documentPath(id), query: query, accept: "multipart/mixed")
            switch response.status {
            case 200:
                break
            case 404:
                response.cancel()
                return []
            case 414 where revisions.count > 1:
                // The URL is too long for the peer: half the revisions at a time.
                response.cancel()
                let half = revisions.count / 2
                return try await revisionsWithAttachments(id, Array(revisions[..<half]), attachmentsSince: attachmentsSince, spool: spool)
                    + revisionsWithAttachments(id, Array(revisions[half...]), attachmentsSince: attachmentsSince, spool: spool)
            case 414 where !attachmentsSince.isEmpty:
                // Still too long: without `atts_since`, every attachment is sent.
                response.cancel()
                return try await revisionsWithAttachments(id, revisions, attachmentsSince: [], spool: spool)
            default:
                let body = (try? await response.readToEnd()) ?? []
                throw unexpected(HTTPClient.Response(status: response.status, headers: response.headers, body: body),
                                 "GET \(id.rawValue)")
            }
            do {
                return try await read(response, spool: spool)
            } catch where error.kind == .requestFailed && backoff.failures < retries {
                let wait = backoff.next()
                logger.notice("Retrying GET request to \(displayName)\(id.rawValue) in \(Double(wait) / 1000) seconds due to error \(error.reason)")
                try await ChangesReader.sleep(milliseconds: wait)
            }
        }
    }

    private func read(_ response: StreamingResponse, spool: any AttachmentSpool) async throws(ReplicationError) -> [AttachedRevision] {
        let contentType = response.header("Content-Type") ?? ""
        if contentType.lowercased().hasPrefix("multipart/") {
            guard let boundary = MultipartReader.boundary(fromContentType: contentType) else {
                throw ReplicationError(.requestFailed, "open_revs answered \(contentType) without a boundary")
            }
            let reader = OpenRevisionsReader(boundary: boundary, spool: spool)
            while let chunk = try await Self.nextChunk(response) { try reader.append(chunk) }
            return try reader.finish()
        }
        // A peer that ignores `Accept` answers JSON, with the attachments inline (`data`);
        // both kinds of target take them so.
        var body: [UInt8] = []
        while let chunk = try await Self.nextChunk(response) { body.append(contentsOf: chunk) }
        guard let entries = try? JSONValue.parse(body).arrayValue else {
            throw ReplicationError(.requestFailed, "open_revs answered neither multipart nor a JSON array")
        }
        return entries.compactMap { entry in
            guard let document = entry["ok"]?.objectValue, let revision = ReplicatedRevision(document: document) else {
                return nil
            }
            return AttachedRevision(revision: Self.withInlineData(revision), bodies: [])
        }
    }

    /// Inline `data` is the decoded body even when the source stores it compressed: its
    /// `digest` (of the stored bytes) is dropped, for the target to compute its own.
    private static func withInlineData(_ revision: ReplicatedRevision) -> ReplicatedRevision {
        guard var attachments = revision.document["_attachments"]?.objectValue else { return revision }
        for (name, meta) in attachments {
            guard var entry = meta.objectValue, entry["data"] != nil else { continue }
            entry["digest"] = nil
            entry["encoding"] = nil
            entry["encoded_length"] = nil
            attachments[name] = .object(entry)
        }
        var copy = revision
        copy.document["_attachments"] = .object(attachments)
        return copy
    }

    private static func nextChunk(_ response: StreamingResponse) async throws(ReplicationError) -> [UInt8]? {
        do {
            return try await response.nextChunk()
        } catch .cancelled {
            throw ReplicationError(.stopped, "stopped")
        } catch {
            throw ReplicationError(.requestFailed, "reading open_revs failed: \(error)")
        }
    }

    /// `GET /db/doc/name?rev=...`: one attachment's bytes as stored (compressed ones asked
    /// for with `Accept-Encoding: gzip`, so they arrive as stored), handed to `write` as
    /// they arrive (of the current revision when `revision` is nil). 404 is `not_found`;
    /// the caller checks the digest.
    public func attachmentBody(_ id: DocumentID, revision: RevisionID?, name: String, encoding: String?,
                               write: ([UInt8]) throws -> Void) async throws(ReplicationError) {
        let path = URLEncoding.documentPath(id) + "/" + URLEncoding.component(name)
        let response = try await stream("GET", path, query: revision.map { [("rev", $0.description)] } ?? [], accept: "*/*",
                                        headers: encoding == nil ? [] : [("Accept-Encoding", encoding!)])
        if response.status == 404 {
            response.cancel()
            throw ReplicationError(.notFound, "\(displayName) has no attachment \(name) of \(id.rawValue)")
        }
        guard response.status == 200 else {
            let body = (try? await response.readToEnd()) ?? []
            throw unexpected(HTTPClient.Response(status: response.status, headers: response.headers, body: body),
                             "GET \(id.rawValue)/\(name)")
        }
        if let encoding, response.header("Content-Encoding")?.lowercased() != encoding {
            response.cancel()
            throw ReplicationError(.requestFailed, "\(displayName) sent attachment \(name) of \(id.rawValue) decoded, not as stored (\(encoding))")
        }
        while let chunk = try await Self.nextChunk(response) {
            do {
                try write(chunk)
            } catch {
                response.cancel()
                throw ReplicationError(.unknown, "cannot store attachment \(name): \(error)")
            }
        }
    }

    /// `atts_since` names at most this many revisions.
    static let maximumAttachmentsSince = 50

    private static func revisionList(_ revisions: [RevisionID]) -> String {
        JSONValue.array(revisions.map { JSONValue($0.description) }).serializedString()
    }

    /// `PUT /db/doc?new_edits=false`: `multipart/related` when bodies follow, JSON when
    /// every attachment is a stub. The target's refusals of this document (412
    /// `missing_stub`, 401/403 from validation, 413...) are returned.
    public func writeRevisionWithAttachments(_ attached: AttachedRevision) async throws(ReplicationError) -> WriteFailure? {
        let revision = attached.revision
        let path = URLEncoding.documentPath(revision.id)
        let response: HTTPClient.Response
        if attached.bodies.isEmpty {
            response = try await send("PUT", path, query: [("new_edits", "false")],
                                      body: revision.json)
        } else {
            let (contentType, body) = MultipartRelatedBody.make(attached)
            response = try await send("PUT", path, query: [("new_edits", "false")], upload: body, contentType: contentType)
        }
        switch response.status {
        case 200..<300:
            return nil
        case 404:
            throw unexpected(response, "PUT \(revision.id.rawValue)")
        case 413:
            return WriteFailure(id: revision.id, revision: revision.revision, error: "too_large",
                                reason: "the target refused \(attached.bodyLength) bytes of attachments as too large")
        default:
            let json = Self.json(response)
            return WriteFailure(id: revision.id, revision: revision.revision,
                                error: json?["error"]?.stringValue ?? "status \(response.status)",
                                reason: json?["reason"]?.stringValue ?? "")
        }
    }
}
