import CouchCore
import CouchStore
import Foundation

/// Streams a standalone attachment upload (`PUT /db/doc/att`) into the blob store.
final class BlobUploadSink: RequestBodySink, @unchecked Sendable {
    private let store: AttachmentStore
    private let writer: BlobWriter

    init(store: AttachmentStore, compressing: Bool = false) throws {
        self.store = store
        writer = try store.makeWriter(compressing: compressing)
    }

    func append(_ bytes: UnsafeRawBufferPointer) throws { try writer.write(bytes) }
    func abort() { writer.abandon() }

    /// The upload, now a blob in the store (held in flight until the write releases it).
    func commit() throws -> StagedBlob { try store.commit(writer) }
}

/// Streams a `multipart/related` document upload: the first part is the document's JSON,
/// every further part an attachment body written straight into the blob store. Each part's
/// staging file is synced and closed as the part ends, so a request holds one descriptor
/// whatever its number of parts, and at most `maximumAttachments` parts are taken.
final class MultipartUploadSink: RequestBodySink, MultipartReader.Delegate, @unchecked Sendable {
    /// Attachments one request may carry: each costs a file, a sync and a rename before the
    /// document is written (CouchDB has no such bound).
    static let maximumAttachments = 1_000

    struct Part {
        let headers: [String: String]
        let writer: BlobWriter
    }

    private let store: AttachmentStore
    private var reader: MultipartReader!
    private var document: [UInt8] = []
    private var parts: [Part] = []
    private var current: BlobWriter?
    private var partCount = 0
    private let maximumDocumentSize: Int

    init(store: AttachmentStore, boundary: String, maximumDocumentSize: Int) {
        self.store = store
        self.maximumDocumentSize = maximumDocumentSize
        reader = MultipartReader(boundary: boundary, delegate: self)
    }

    func append(_ bytes: UnsafeRawBufferPointer) throws {
        do {
            try reader.append(bytes)
        } catch let error as MultipartError {
            throw CouchError.badRequest(error.reason)
        }
    }

    func abort() {
        parts.forEach { $0.writer.abandon() }
        current?.abandon()
    }

    func beginPart(headers: [String: String]) throws {
        partCount += 1
        if partCount > Self.maximumAttachments + 1 {
            throw CouchError(.tooLarge, "A multipart request may carry at most \(Self.maximumAttachments) attachments.")
        }
        if partCount > 1 {
            let writer = try store.makeWriter()
            current = writer
            parts.append(Part(headers: headers, writer: writer))
        }
    }

    func partData(_ bytes: ArraySlice<UInt8>) throws {
        if let current {
            try bytes.withUnsafeBytes { try current.write($0) }
        } else {
            guard document.count + bytes.count <= maximumDocumentSize else {
                throw CouchError(.tooLarge, "Document is too large")
            }
            document.append(contentsOf: bytes)
        }
    }

    func endPart() throws {
        try current?.close()
        current = nil
    }

    /// The document JSON and the attachment parts in order, with the file name each
    /// part's `Content-Disposition` gives, if any: received, for the caller to commit
    /// (`AttachmentStore.commit`); one dropped is removed.
    func finish() throws -> (document: [UInt8], parts: [(filename: String?, writer: BlobWriter)]) {
        do {
            try reader.finish()
        } catch let error as MultipartError {
            abort()
            throw CouchError.badRequest(error.reason)
        }
        guard partCount > 0 else { throw CouchError.badRequest("multipart body has no document part") }
        return (document, parts.map { (Self.filename($0.headers["content-disposition"]), $0.writer) })
    }

    /// `attachment; filename="name"` → name.
    static func filename(_ disposition: String?) -> String? {
        guard let disposition, let range = disposition.range(of: "filename=") else { return nil }
        var value = disposition[range.upperBound...].trimmingWhitespace()
        if let end = value.firstIndex(of: ";") { value = String(value[..<end]) }
        if value.hasPrefix("\""), value.hasSuffix("\""), value.count >= 2 { value = String(value.dropFirst().dropLast()) }
        return PercentDecoding.decode(Substring(value), plusIsSpace: false) ?? value
    }
}
