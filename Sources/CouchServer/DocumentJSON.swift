import CouchCore
import CouchStore
import Foundation

/// Which metadata a document's JSON carries, from CouchDB's query options.
struct DocumentRenderOptions: Sendable {
    /// What the reader may see (`DocumentReadRule`): every rendering applies it.
    let reader: DocumentReadRule
    var revisions = false
    /// The most ancestors `_revisions` lists: the database's `_revs_limit`, as CouchDB's
    /// `make_doc` cuts a document's path when it reads it (older ones go at compaction).
    var revisionsLimit = Int.max
    var revisionsInfo = false
    var conflicts = false
    var deletedConflicts = false
    var localSequence = false
    var attachments = AttachmentRenderOptions()

    init(reader: DocumentReadRule) {
        self.reader = reader
    }

    /// The request's reader and options, for documents of `database`.
    init(_ context: RouteContext, database: Database) throws {
        reader = try context.documentReadRule(for: database)
        let meta = try context.boolOption("meta")
        revisions = try context.boolOption("revs")
        revisionsLimit = database.revsLimit
        revisionsInfo = try context.boolOption("revs_info") || meta
        conflicts = try context.boolOption("conflicts") || meta
        deletedConflicts = try context.boolOption("deleted_conflicts") || meta
        localSequence = try context.boolOption("local_seq") || meta
        attachments = try AttachmentRenderOptions(context, database: database)
    }
}

/// How `_attachments` is written: stubs (the default), inline base64 `data`
/// (`attachments=true`), or `follows` markers for a multipart response.
struct AttachmentRenderOptions: Sendable {
    enum Mode: Sendable { case stubs, data, follows }
    var mode = Mode.stubs
    /// `atts_since`: attachments not changed after these revisions stay stubs.
    var since: [RevisionID] = []
    var encodingInfo = false
    var store: AttachmentStore?
    /// Fetches a body that an on-demand pull left on its source (and stores it), so that
    /// every rendering that sends bodies — a document as JSON or multipart, `open_revs`,
    /// `_bulk_get`, `_all_docs`, `_changes`, a view — has it.
    var fetchAbsentBody: (@Sendable (AttachmentInfo, StoredRevision) throws -> AttachmentInfo)?

    init(store: AttachmentStore? = nil) { self.store = store }

    init(_ context: RouteContext, database: Database) throws(CouchError) {
        store = database.attachments
        let onDemand = context.server.attachmentsOnDemand
        // After a failed fetch, the answer asks the source nothing for a while: a listing of
        // a thousand documents must not wait for a source out of reach a thousand times, and a
        // continuous feed tries again later.
        let failure = RecentFailure(seconds: 30)
        fetchAbsentBody = { attachment, revision in
            if let error = failure.error { throw error }
            do {
                return try onDemand.materialize(database, id: revision.id, revision: revision.revision, attachment: attachment)
            } catch {
                failure.record(error)
                throw error
            }
        }
        encodingInfo = try context.boolOption("att_encoding_info")
        if try context.boolOption("attachments") { mode = .data }
        if let value = try context.jsonOption("atts_since") {
            guard let list = value.arrayValue else { throw CouchError.badRequest("atts_since must be a JSON array") }
            since = list.compactMap { $0.stringValue.flatMap(RevisionID.init) }
            if mode == .stubs { mode = .data }
        }
    }

    /// Bodies of every attachment are sent (but those `atts_since` covers), whatever the query said.
    mutating func sendsAll() {
        if mode == .stubs { mode = .data }
    }

    /// The attachments of `revision` whose data is sent (rather than a stub).
    func sending(_ revision: StoredRevision, record: DocumentRecord?) -> [AttachmentInfo] {
        guard mode != .stubs else { return [] }
        var threshold = 0
        if !since.isEmpty, let record {
            let history = Set(record.tree.history(of: revision.revision))
            threshold = since.filter { history.contains($0) }.map(\.generation).max() ?? 0
        }
        // No ancestor in common: every body (even one a replicated write left at revpos 0).
        return threshold == 0 ? revision.attachments : revision.attachments.filter { $0.revpos > threshold }
    }

    /// `attachment` of `revision` with its body stored: fetched first if an on-demand pull
    /// left it on its source (`attachment_not_downloaded` when that fails or cannot be tried).
    func withBody(_ attachment: AttachmentInfo, of revision: StoredRevision) throws -> AttachmentInfo {
        guard attachment.isBodyAbsent else { return attachment }
        guard let fetchAbsentBody else { throw attachment.absentBodyError(documentID: revision.id.rawValue) }
        return try fetchAbsentBody(attachment, revision)
    }

    /// The bytes of an attachment of `revision` as clients see them (decompressed when stored gzip).
    func identityData(_ attachment: AttachmentInfo, of revision: StoredRevision) throws -> [UInt8] {
        guard let store else { throw CouchError.internalError("no attachment store") }
        let stored = try store.read(try withBody(attachment, of: revision).blobKey)
        guard attachment.encoding == "gzip" else { return stored }
        guard let decoded = Gzip.decompress(stored) else { throw CouchError.internalError("corrupt gzip attachment") }
        return decoded
    }
}

/// Writes documents as CouchDB does: `_id`, `_rev`, the stored body's members as the
/// client sent them, then `_deleted`, `_revisions` and the other metadata — spliced
/// into the stored bytes without parsing them.
enum DocumentJSON {
    /// `borrowedBody`: the stored body when a listing borrows it from its statement (then
    /// `revision.body` is not read). Throws when the reader may not see the document; writes
    /// what the reader may see of it (`options.reader`).
    static func render(_ revision: StoredRevision, borrowedBody: UnsafeRawBufferPointer? = nil, record: DocumentRecord?,
                       options: DocumentRenderOptions, into output: inout [UInt8]) throws {
        if options.reader.isRestricted {
            var stored = revision
            if let borrowedBody {
                stored = StoredRevision(id: revision.id, revision: revision.revision, isDeleted: revision.isDeleted,
                                        body: Array(borrowedBody), attachments: revision.attachments)
            }
            let shown = try options.reader.readable(stored)
            return try shown.body.withUnsafeBytes { body in
                try write(shown, body: body, record: record, options: options, into: &output)
            }
        }
        guard let body = borrowedBody else {
            return try revision.body.withUnsafeBytes { body in
                try write(revision, body: body, record: record, options: options, into: &output)
            }
        }
        try write(revision, body: body, record: record, options: options, into: &output)
    }

    private static func write(_ revision: StoredRevision, body: UnsafeRawBufferPointer, record: DocumentRecord?,
                              options: DocumentRenderOptions, into output: inout [UInt8]) throws {
        output.append(literal: #"{"_id":"#)
        JSONWriter.appendString(revision.id.rawValue, to: &output)
        output.append(literal: #","_rev":"#)
        revision.revision.appendJSON(to: &output)
        appendMembers(of: body, to: &output)
        if revision.isDeleted { output.append(literal: #","_deleted":true"#) }
        if let record {
            appendMetadata(revision.revision, record: record, options: options, to: &output)
        }
        if !revision.attachments.isEmpty {
            try appendAttachments(revision, record: record, options: options.attachments, to: &output)
        }
        output.append(UInt8(ascii: "}"))
    }

    static func render(_ revision: StoredRevision, record: DocumentRecord?, options: DocumentRenderOptions) throws -> [UInt8] {
        var output: [UInt8] = []
        output.reserveCapacity(revision.body.count + 128)
        try render(revision, record: record, options: options, into: &output)
        return output
    }

    /// As `render`, for a row of a listing, whose status went out before its rows: a document
    /// whose attachment bodies cannot be had (an on-demand pull's source out of reach) is
    /// written with stubs rather than ending the answer.
    static func renderListed(_ revision: StoredRevision, borrowedBody: UnsafeRawBufferPointer? = nil,
                             record: DocumentRecord?, options: DocumentRenderOptions, into output: inout [UInt8]) throws {
        let start = output.count
        do {
            try render(revision, borrowedBody: borrowedBody, record: record, options: options, into: &output)
        } catch {
            guard options.attachments.mode != .stubs else { throw error }
            output.removeSubrange(start...)
            var stubs = options
            stubs.attachments = AttachmentRenderOptions()
            try render(revision, borrowedBody: borrowedBody, record: record, options: stubs, into: &output)
        }
    }

    static func renderListed(_ revision: StoredRevision, record: DocumentRecord?, options: DocumentRenderOptions) throws -> [UInt8] {
        var output: [UInt8] = []
        output.reserveCapacity(revision.body.count + 128)
        try renderListed(revision, record: record, options: options, into: &output)
        return output
    }

    /// `,"_attachments":{"name":{"content_type":…,"revpos":…,"digest":…,"length":…,"stub":true}}`
    /// in CouchDB's member order; `data` or `follows` instead of the stub for those sent.
    private static func appendAttachments(_ revision: StoredRevision, record: DocumentRecord?,
                                          options: AttachmentRenderOptions, to output: inout [UInt8]) throws {
        let sending = Set(options.sending(revision, record: record).map(\.name))
        output.append(literal: #","_attachments":{"#)
        for (index, attachment) in revision.attachments.enumerated() {
            if index > 0 { output.append(UInt8(ascii: ",")) }
            JSONWriter.appendString(attachment.name, to: &output)
            output.append(literal: #":{"content_type":"#)
            JSONWriter.appendString(attachment.contentType, to: &output)
            output.append(contentsOf: #","revpos":\#(attachment.revpos),"digest":"#.utf8)
            JSONWriter.appendString(attachment.digest, to: &output)
            var encodingInfo = options.encodingInfo
            if !sending.contains(attachment.name) {
                output.append(contentsOf: #","length":\#(attachment.length),"stub":true"#.utf8)
            } else if options.mode == .follows {
                // Multipart parts carry the stored bytes, so their encoding is always stated.
                output.append(contentsOf: #","length":\#(attachment.length),"follows":true"#.utf8)
                encodingInfo = true
            } else {
                output.append(literal: #","data":""#)
                Base64.encode(try options.identityData(attachment, of: revision), into: &output)
                output.append(UInt8(ascii: "\""))
            }
            if encodingInfo, let encoding = attachment.encoding {
                output.append(literal: #","encoding":"#)
                JSONWriter.appendString(encoding, to: &output)
                output.append(contentsOf: #","encoded_length":\#(attachment.storedLength)"#.utf8)
            }
            output.append(UInt8(ascii: "}"))
        }
        output.append(UInt8(ascii: "}"))
    }

    static func renderLocal(_ document: LocalDocument) -> [UInt8] {
        var output: [UInt8] = Array(#"{"_id":"#.utf8)
        JSONWriter.appendString(document.id.rawValue, to: &output)
        output.append(literal: #","_rev":"#)
        JSONWriter.appendString(document.revisionID.description, to: &output)
        appendMembers(of: document.body, to: &output)
        output.append(UInt8(ascii: "}"))
        return output
    }

    /// A live document without attachments or metadata, from its stored bytes: `{"_id":…,"_rev":…`,
    /// the body's members, `}` (`revision` as stored, when `RevisionID.isWrittenAsStored`).
    static func appendStored(id: UnsafeRawBufferPointer, revision: UnsafeRawBufferPointer,
                             body: UnsafeRawBufferPointer, to output: inout [UInt8]) {
        output.append(literal: #"{"_id":"#)
        JSONWriter.appendString(utf8: id, to: &output)
        output.append(literal: #","_rev":""#)
        output.append(contentsOf: revision)
        output.append(UInt8(ascii: "\""))
        appendMembers(of: body, to: &output)
        output.append(UInt8(ascii: "}"))
    }

    /// Appends `,"a":1,"b":2` from a stored `{"a":1,"b":2}`.
    static func appendMembers(of body: [UInt8], to output: inout [UInt8]) {
        body.withUnsafeBytes { appendMembers(of: $0, to: &output) }
    }

    static func appendMembers(of body: UnsafeRawBufferPointer, to output: inout [UInt8]) {
        guard body.count > 2 else { return }
        output.append(UInt8(ascii: ","))
        output.append(contentsOf: UnsafeRawBufferPointer(rebasing: body[1..<(body.count - 1)]))
    }

    private static func appendMetadata(_ revision: RevisionID, record: DocumentRecord, options: DocumentRenderOptions,
                                       to output: inout [UInt8]) {
        let tree = record.tree
        if options.revisions {
            output.append(literal: #","_revisions":"#)
            RevisionHistory(Array(tree.history(of: revision).prefix(options.revisionsLimit))).write(to: &output)
        }
        if options.revisionsInfo {
            output.append(literal: #","_revs_info":["#)
            for (index, ancestor) in tree.history(of: revision).enumerated() {
                if index > 0 { output.append(UInt8(ascii: ",")) }
                output.append(literal: #"{"rev":"#)
                JSONWriter.appendString(ancestor.description, to: &output)
                output.append(literal: #","status":""#)
                output.append(contentsOf: (tree.status(of: ancestor) ?? .missing).rawValue.utf8)
                output.append(literal: #""}"#)
            }
            output.append(UInt8(ascii: "]"))
        }
        if options.conflicts {
            let conflicts = tree.conflicts.filter { $0 != revision }
            if !conflicts.isEmpty { appendRevisionList("_conflicts", conflicts, to: &output) }
        }
        if options.deletedConflicts {
            let deleted = tree.deletedConflicts.filter { $0 != revision }
            if !deleted.isEmpty { appendRevisionList("_deleted_conflicts", deleted, to: &output) }
        }
        if options.localSequence {
            output.append(literal: #","_local_seq":"#)
            output.append(contentsOf: String(record.sequence).utf8)
        }
    }

    static func appendRevisionList(_ name: String, _ revisions: [RevisionID], to output: inout [UInt8]) {
        output.append(UInt8(ascii: ","))
        JSONWriter.appendString(name, to: &output)
        output.append(literal: ":[")
        for (index, revision) in revisions.enumerated() {
            if index > 0 { output.append(UInt8(ascii: ",")) }
            revision.appendJSON(to: &output)
        }
        output.append(UInt8(ascii: "]"))
    }

    /// `{"ok":true,"id":...,"rev":...}`, the answer to a write, as a response body.
    static func writeResult(id: DocumentID, revision: RevisionID) -> [UInt8] {
        var output: [UInt8] = []
        output.reserveCapacity(id.rawValue.utf8.count + 64)
        appendWriteResult(id: id, revision: revision, to: &output)
        output.append(UInt8(ascii: "\n"))
        return output
    }

    /// `{"ok":true,"id":...,"rev":...}` written without building a `JSONValue` (a `_bulk_docs`
    /// answer has one per document).
    static func appendWriteResult(id: DocumentID, revision: RevisionID, to output: inout [UInt8]) {
        output.append(literal: #"{"ok":true,"id":"#)
        JSONWriter.appendString(id.rawValue, to: &output)
        output.append(literal: #","rev":"#)
        revision.appendJSON(to: &output)
        output.append(UInt8(ascii: "}"))
    }
}
