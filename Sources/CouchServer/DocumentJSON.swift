import CouchCore
import CouchStore

/// Which metadata a document's JSON carries, from CouchDB's query options.
struct DocumentRenderOptions: Sendable {
    var revisions = false
    var revisionsInfo = false
    var conflicts = false
    var deletedConflicts = false
    var localSequence = false

    init() {}

    init(_ context: RouteContext) throws(CouchError) {
        let meta = try context.boolOption("meta")
        revisions = try context.boolOption("revs")
        revisionsInfo = try context.boolOption("revs_info") || meta
        conflicts = try context.boolOption("conflicts") || meta
        deletedConflicts = try context.boolOption("deleted_conflicts") || meta
        localSequence = try context.boolOption("local_seq") || meta
    }
}

/// Writes documents as CouchDB does: `_id`, `_rev`, the stored body's members as the
/// client sent them, then `_deleted`, `_revisions` and the other metadata — spliced
/// into the stored bytes without parsing them.
enum DocumentJSON {
    static func render(_ revision: StoredRevision, record: DocumentRecord?, options: DocumentRenderOptions,
                       into output: inout [UInt8]) {
        output.append(contentsOf: #"{"_id":"#.utf8)
        JSONWriter.appendString(revision.id.rawValue, to: &output)
        output.append(contentsOf: #","_rev":"#.utf8)
        JSONWriter.appendString(revision.revision.description, to: &output)
        appendMembers(of: revision.body, to: &output)
        if revision.isDeleted { output.append(contentsOf: #","_deleted":true"#.utf8) }
        if let record {
            appendMetadata(revision.revision, record: record, options: options, to: &output)
        }
        output.append(UInt8(ascii: "}"))
    }

    static func render(_ revision: StoredRevision, record: DocumentRecord?, options: DocumentRenderOptions) -> [UInt8] {
        var output: [UInt8] = []
        output.reserveCapacity(revision.body.count + 128)
        render(revision, record: record, options: options, into: &output)
        return output
    }

    static func renderLocal(_ document: LocalDocument) -> [UInt8] {
        var output: [UInt8] = Array(#"{"_id":"#.utf8)
        JSONWriter.appendString(document.id.rawValue, to: &output)
        output.append(contentsOf: #","_rev":"#.utf8)
        JSONWriter.appendString(document.revisionID.description, to: &output)
        appendMembers(of: document.body, to: &output)
        output.append(UInt8(ascii: "}"))
        return output
    }

    /// Appends `,"a":1,"b":2` from a stored `{"a":1,"b":2}`.
    static func appendMembers(of body: [UInt8], to output: inout [UInt8]) {
        guard body.count > 2 else { return }
        output.append(UInt8(ascii: ","))
        output.append(contentsOf: body[1..<(body.count - 1)])
    }

    private static func appendMetadata(_ revision: RevisionID, record: DocumentRecord, options: DocumentRenderOptions,
                                       to output: inout [UInt8]) {
        let tree = record.tree
        if options.revisions {
            output.append(contentsOf: #","_revisions":"#.utf8)
            RevisionHistory(tree.history(of: revision)).json.write(to: &output)
        }
        if options.revisionsInfo {
            output.append(contentsOf: #","_revs_info":["#.utf8)
            for (index, ancestor) in tree.history(of: revision).enumerated() {
                if index > 0 { output.append(UInt8(ascii: ",")) }
                output.append(contentsOf: #"{"rev":"#.utf8)
                JSONWriter.appendString(ancestor.description, to: &output)
                output.append(contentsOf: #","status":""#.utf8)
                output.append(contentsOf: (tree.status(of: ancestor) ?? .missing).rawValue.utf8)
                output.append(contentsOf: #""}"#.utf8)
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
            output.append(contentsOf: #","_local_seq":"#.utf8)
            output.append(contentsOf: String(record.sequence).utf8)
        }
    }

    static func appendRevisionList(_ name: String, _ revisions: [RevisionID], to output: inout [UInt8]) {
        output.append(UInt8(ascii: ","))
        JSONWriter.appendString(name, to: &output)
        output.append(contentsOf: ":[".utf8)
        for (index, revision) in revisions.enumerated() {
            if index > 0 { output.append(UInt8(ascii: ",")) }
            JSONWriter.appendString(revision.description, to: &output)
        }
        output.append(UInt8(ascii: "]"))
    }

    /// `{"ok":true,"id":...,"rev":...}`, the answer to a write.
    static func writeResult(id: DocumentID, revision: RevisionID) -> JSONValue {
        ["ok": true, "id": JSONValue(id.rawValue), "rev": JSONValue(revision.description)]
    }
}
