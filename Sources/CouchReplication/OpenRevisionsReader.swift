import CouchCore

/// Reads the answer to `GET /db/doc?open_revs=[...]&attachments=true` sent as
/// `multipart/mixed`, as it arrives. Each part is one revision: plain JSON (a document
/// with no attachment body to send, or `{"missing": rev}`), or a nested
/// `multipart/related` body — the document's JSON, whose `_attachments` marks the bodies
/// that follow, then one part per body, named by its `Content-Disposition` file name or
/// else taken in the order of the JSON. Attachment bytes go straight into the spool.
final class OpenRevisionsReader: MultipartReader.Delegate {
    private let spool: any AttachmentSpool
    private var reader: MultipartReader!
    private var part = Part.none
    private(set) var revisions: [AttachedRevision] = []

    private enum Part {
        case none
        case json([UInt8])
        case related(RelatedDocumentReader)
    }

    init(boundary: String, spool: any AttachmentSpool) {
        self.spool = spool
        reader = MultipartReader(boundary: boundary, delegate: self)
    }

    func append(_ bytes: [UInt8]) throws(ReplicationError) {
        do {
            try reader.append(bytes)
        } catch {
            throw Self.replicationError(error)
        }
    }

    /// The revisions read, once the body has ended.
    func finish() throws(ReplicationError) -> [AttachedRevision] {
        do {
            try reader.finish()
        } catch {
            throw Self.replicationError(error)
        }
        return revisions
    }

    static func replicationError(_ error: Error) -> ReplicationError {
        if let error = error as? ReplicationError { return error }
        if let error = error as? MultipartError {
            return ReplicationError(.requestFailed, "malformed multipart answer to open_revs: \(error.reason)")
        }
        return ReplicationError(.unknown, String(describing: error))
    }

    // MARK: MultipartReader.Delegate (the outer multipart/mixed body)

    func beginPart(headers: [String: String]) throws {
        let contentType = headers["content-type"] ?? "application/json"
        if contentType.lowercased().hasPrefix("multipart/related") {
            guard let boundary = MultipartReader.boundary(fromContentType: contentType) else {
                throw ReplicationError(.requestFailed, "a multipart/related part of open_revs has no boundary")
            }
            part = .related(RelatedDocumentReader(boundary: boundary, spool: spool))
        } else {
            part = .json([])
        }
    }

    func partData(_ bytes: ArraySlice<UInt8>) throws {
        switch part {
        case .none: break
        case .json(var json):
            part = .none
            json.append(contentsOf: bytes)
            part = .json(json)
        case .related(let related): try related.append(bytes)
        }
    }

    func endPart() throws {
        defer { part = .none }
        switch part {
        case .none: break
        case .json(let json):
            guard let object = try? JSONValue.parse(json).objectValue else {
                throw ReplicationError(.requestFailed, "open_revs sent a part that is not JSON")
            }
            if object["missing"] != nil || object["error"] != nil { return }
            guard let revision = ReplicatedRevision(document: object) else {
                throw ReplicationError(.requestFailed, "open_revs sent a document without _id or _rev")
            }
            if let name = RelatedDocumentReader.following(revision).first?.name {
                throw ReplicationError(.requestFailed, "attachment \(name) of \(revision.id.rawValue) follows, but no body came")
            }
            revisions.append(AttachedRevision(revision: revision, bodies: []))
        case .related(let related):
            revisions.append(try related.finish())
        }
    }
}

/// One `multipart/related` document: its JSON, then the bodies of its attachments.
final class RelatedDocumentReader: MultipartReader.Delegate {
    private let spool: any AttachmentSpool
    private var reader: MultipartReader!
    private var json: [UInt8] = []
    private var partCount = 0
    private var revision: ReplicatedRevision?
    /// The attachments marked `follows`, in the order of the JSON.
    private var expected: [Following] = []
    private var received: [String: AttachmentBody] = [:]
    private var current: (following: Following, writer: any AttachmentSpoolWriter)?

    struct Following {
        let name: String
        let contentType: String
        let encoding: String?
        /// The number of bytes the part carries (the encoded length when compressed).
        let length: Int?
    }

    init(boundary: String, spool: any AttachmentSpool) {
        self.spool = spool
        reader = MultipartReader(boundary: boundary, delegate: self)
    }

    func append(_ bytes: ArraySlice<UInt8>) throws {
        try bytes.withUnsafeBytes { try reader.append($0) }
    }

    func finish() throws -> AttachedRevision {
        try reader.finish()
        guard let revision else { throw ReplicationError(.requestFailed, "a multipart/related part of open_revs is empty") }
        let bodies = try expected.map { following throws(ReplicationError) -> AttachmentBody in
            guard let body = received[following.name] else {
                throw ReplicationError(.requestFailed, "no body came for attachment \(following.name) of \(revision.id.rawValue)")
            }
            return body
        }
        return AttachedRevision(revision: revision, bodies: bodies)
    }

    /// The attachments of a document marked `"follows": true`, in order.
    static func following(_ revision: ReplicatedRevision) -> [Following] {
        guard let attachments = revision.document["_attachments"]?.objectValue else { return [] }
        return attachments.compactMap { name, meta in
            guard meta["follows"]?.boolValue == true else { return nil }
            let encoding = meta["encoding"]?.stringValue.flatMap { $0 == "identity" ? nil : $0 }
            return Following(name: name, contentType: meta["content_type"]?.stringValue ?? "application/octet-stream",
                             encoding: encoding,
                             length: encoding == nil ? meta["length"]?.intValue : meta["encoded_length"]?.intValue)
        }
    }

    func beginPart(headers: [String: String]) throws {
        partCount += 1
        guard partCount > 1 else { return }
        guard let revision else { throw ReplicationError(.requestFailed, "open_revs sent an attachment before its document") }
        let named = MultipartRelatedBody.filename(fromContentDisposition: headers["content-disposition"])
        let pending = expected.filter { received[$0.name] == nil }
        guard let following = pending.first(where: { $0.name == named })
                ?? named.flatMap({ name in pending.first { $0.name == URLEncoding.percentDecoded(name) } })
                ?? pending.first else {
            throw ReplicationError(.requestFailed, "open_revs sent more attachment bodies than \(revision.id.rawValue) has")
        }
        current = (following, try spool.makeWriter())
    }

    func partData(_ bytes: ArraySlice<UInt8>) throws {
        if let current {
            try bytes.withUnsafeBytes { bytes in try current.writer.write(bytes) }
        } else if partCount == 1 {
            json.append(contentsOf: bytes)
        }
    }

    func endPart() throws {
        if partCount == 1 {
            guard let object = try? JSONValue.parse(json).objectValue, let revision = ReplicatedRevision(document: object) else {
                throw ReplicationError(.requestFailed, "open_revs sent a document that is not JSON with _id and _rev")
            }
            self.revision = revision
            expected = Self.following(revision)
            json = []
            return
        }
        guard let (following, writer) = current else { return }
        current = nil
        if let length = following.length, length != writer.length {
            throw ReplicationError(.requestFailed, "attachment \(following.name) came with \(writer.length) bytes, not \(length)")
        }
        received[following.name] = AttachmentBody(name: following.name, contentType: following.contentType,
                                                  encoding: following.encoding, length: writer.length,
                                                  content: try writer.finish())
    }
}
