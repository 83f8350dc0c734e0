import CouchCore
import CouchStore
import Foundation

/// Builds a MIME multipart body (`multipart/mixed`, `multipart/related`) as CouchDB writes
/// them; attachment parts refer to blob files, so large bodies are streamed, not copied.
struct MultipartWriter {
    let boundary = Digest.randomHex(bytes: 16)
    private(set) var segments: [SegmentedStream.Segment] = []

    func contentType(subtype: String) -> String {
        "multipart/\(subtype); boundary=\"\(boundary)\""
    }

    mutating func addPart(headers: [(String, String)], body: [UInt8]) {
        appendBytes(head(headers) + body + Array("\r\n".utf8))
    }

    mutating func addPart(headers: [(String, String)], file path: String, length: Int) {
        appendBytes(head(headers))
        segments.append(.file(path: path, offset: 0, length: length))
        appendBytes(Array("\r\n".utf8))
    }

    /// A part whose body is itself a multipart body (a document with its attachments).
    mutating func addPart(headers: [(String, String)], nested: MultipartWriter, subtype: String) {
        appendBytes(head(headers + [("Content-Type", nested.contentType(subtype: subtype))]))
        for segment in nested.finished().segments {
            if case .bytes(let bytes) = segment { appendBytes(bytes) } else { segments.append(segment) }
        }
        appendBytes(Array("\r\n".utf8))
    }

    /// The body with its closing delimiter.
    func finished() -> MultipartWriter {
        var copy = self
        copy.appendBytes(Array("--\(boundary)--".utf8))
        return copy
    }

    /// A response carrying this body (closed), streamed when it refers to files.
    func response(subtype: String, status: Int = 200) -> HTTPResponse {
        let body = finished().segments
        let headers = [("Content-Type", contentType(subtype: subtype))]
        if body.count == 1, case .bytes(let bytes) = body[0] {
            return HTTPResponse(status: status, headers: headers, body: .bytes(bytes))
        }
        return HTTPResponse(status: status, headers: headers, body: .stream(SegmentedStream(body)))
    }

    private func head(_ headers: [(String, String)]) -> [UInt8] {
        var text = "--\(boundary)\r\n"
        for (name, value) in headers { text += "\(name): \(value)\r\n" }
        return Array((text + "\r\n").utf8)
    }

    private mutating func appendBytes(_ bytes: [UInt8]) {
        if case .bytes(let existing)? = segments.last {
            segments[segments.count - 1] = .bytes(existing + bytes)
        } else {
            segments.append(.bytes(bytes))
        }
    }
}

/// A document with attachment bodies as `multipart/related`: the JSON part with
/// `"follows": true` markers, then one part per attachment sent, in the same order.
enum MultipartDocument {
    /// Nil when no attachment data is to be sent (the plain JSON suffices).
    static func related(_ revision: StoredRevision, record: DocumentRecord?,
                        options: DocumentRenderOptions) throws -> MultipartWriter? {
        let sending = options.attachments.sending(revision, record: record)
        guard !sending.isEmpty, let store = options.attachments.store else { return nil }
        var followOptions = options
        followOptions.attachments.mode = .follows
        var writer = MultipartWriter()
        writer.addPart(headers: [("Content-Type", "application/json")],
                       body: try DocumentJSON.render(revision, record: record, options: followOptions))
        if let absent = sending.first(where: \.isBodyAbsent) {
            throw absent.absentBodyError(documentID: revision.id.rawValue)
        }
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
