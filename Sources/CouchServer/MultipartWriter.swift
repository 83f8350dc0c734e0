import CouchCore
import CouchStore
import Foundation

/// Builds a MIME multipart body (`multipart/mixed`, `multipart/related`) as CouchDB writes
/// them; attachment parts refer to blob files, so large bodies are streamed, not copied.
/// Bytes accumulate in one buffer until a file part closes the run: the body is built in time
/// linear in its size (a `_bulk_get` of 100,000 documents is one append per part).
struct MultipartWriter {
    let boundary = Digest.randomHex(bytes: 16)
    /// Byte runs and files before `pending`.
    private var segments: [SegmentedStream.Segment] = []
    private var pending: [UInt8] = []

    func contentType(subtype: String) -> String {
        "multipart/\(subtype); boundary=\"\(boundary)\""
    }

    mutating func addPart(headers: [(String, String)], body: [UInt8]) {
        appendHead(headers)
        pending.append(contentsOf: body)
        pending.append(contentsOf: "\r\n".utf8)
    }

    mutating func addPart(headers: [(String, String)], file path: String, length: Int) {
        appendHead(headers)
        appendSegment(.file(path: path, offset: 0, length: length))
        pending.append(contentsOf: "\r\n".utf8)
    }

    /// A part whose body is itself a multipart body (a document with its attachments).
    mutating func addPart(headers: [(String, String)], nested: MultipartWriter, subtype: String) {
        appendHead(headers + [("Content-Type", nested.contentType(subtype: subtype))])
        for segment in nested.finishedSegments() { appendSegment(segment) }
        pending.append(contentsOf: "\r\n".utf8)
    }

    /// The body's segments with its closing delimiter.
    func finishedSegments() -> [SegmentedStream.Segment] {
        var copy = self
        copy.pending.append(contentsOf: "--\(boundary)--".utf8)
        copy.segments.append(.bytes(copy.pending))
        return copy.segments
    }

    /// A response carrying this body (closed), streamed when it refers to files.
    func response(subtype: String, status: Int = 200) -> HTTPResponse {
        let body = finishedSegments()
        let headers = [("Content-Type", contentType(subtype: subtype))]
        if body.count == 1, case .bytes(let bytes) = body[0] {
            return HTTPResponse(status: status, headers: headers, body: .bytes(bytes))
        }
        return HTTPResponse(status: status, headers: headers, body: .stream(SegmentedStream(body)))
    }

    private mutating func appendHead(_ headers: [(String, String)]) {
        pending.append(contentsOf: "--\(boundary)\r\n".utf8)
        for (name, value) in headers {
            pending.append(contentsOf: name.utf8)
            pending.append(contentsOf: ": ".utf8)
            pending.append(contentsOf: value.utf8)
            pending.append(contentsOf: "\r\n".utf8)
        }
        pending.append(contentsOf: "\r\n".utf8)
    }

    private mutating func appendSegment(_ segment: SegmentedStream.Segment) {
        if case .bytes(let bytes) = segment {
            pending.append(contentsOf: bytes)
            return
        }
        if !pending.isEmpty {
            segments.append(.bytes(pending))
            pending = []
        }
        segments.append(segment)
    }
}

/// A document with attachment bodies as `multipart/related`: the JSON part with
/// `"follows": true` markers, then one part per attachment sent, in the same order.
enum MultipartDocument {
    /// Nil when no attachment data is to be sent (the plain JSON suffices).
    static func related(_ revision: StoredRevision, record: DocumentRecord?,
                        options: DocumentRenderOptions) throws -> MultipartWriter? {
        let names = Set(options.attachments.sending(revision, record: record).map(\.name))
        guard !names.isEmpty, let store = options.attachments.store else { return nil }
        // Bodies an on-demand pull left on its source are fetched first (a peer pulling from
        // here reads them this way).
        let attachments = try revision.attachments.map {
            names.contains($0.name) ? try options.attachments.withBody($0, of: revision) : $0
        }
        let revision = StoredRevision(id: revision.id, revision: revision.revision, isDeleted: revision.isDeleted,
                                      body: revision.body, attachments: attachments)
        let sending = attachments.filter { names.contains($0.name) }
        var followOptions = options
        followOptions.attachments.mode = .follows
        var writer = MultipartWriter()
        writer.addPart(headers: [("Content-Type", "application/json")],
                       body: try DocumentJSON.render(revision, record: record, options: followOptions))
        for attachment in sending {
            var headers = [("Content-Disposition", "attachment; filename=\"\(escapedFilename(attachment.name))\""),
                           ("Content-Type", attachment.contentType),
                           ("Content-Length", String(attachment.storedLength))]
            if let encoding = attachment.encoding { headers.append(("Content-Encoding", encoding)) }
            writer.addPart(headers: headers, file: store.path(for: attachment.blobKey), length: attachment.storedLength)
        }
        return writer
    }

    private static func escapedFilename(_ name: String) -> String {
        name.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
    }
}
