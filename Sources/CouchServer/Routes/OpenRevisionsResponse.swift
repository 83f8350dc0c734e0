import CouchCore
import CouchStore

/// `GET /db/doc?open_revs=all|[...]`: several leaves of one document at once, as a JSON
/// array of `{"ok":doc}` / `{"missing":rev}`, or `multipart/mixed` when the client asks
/// for it (CouchDB's replicator does).
enum OpenRevisionsResponse {
    static func make(_ context: RouteContext, database: Database, id: DocumentID) throws -> HTTPResponse {
        let requested = try requestedRevisions(context)
        let latest = try context.boolOption("latest")
        var options = DocumentRenderOptions(reader: try context.documentReadRule(for: database))
        options.revisions = try context.boolOption("revs")
        options.conflicts = try context.boolOption("conflicts")
        options.attachments = try AttachmentRenderOptions(context, database: database)
        // As multipart, every attachment's body is sent (but those `atts_since` covers), asked
        // for or not, as CouchDB's `send_docs_multipart` sends them: its replicator asks without
        // `attachments=true` and takes a stub for one the target already has.
        if context.request.acceptsMultipart("mixed") { options.attachments.sendsAll() }

        guard let (record, revisions, stored) = try database.revisions(id, choosing: {
            resolve(requested, tree: $0, latest: latest)
        }) else {
            if requested == nil { throw CouchError.notFound("missing") }
            return try render(context, results: requested!.map { .missing($0) }, options: options)
        }
        let results: [Result] = zip(revisions, stored).map { revision, body in body.map { .found($0) } ?? .missing(revision) }
        return try render(context, results: results, record: record, options: options)
    }

    enum Result {
        case found(StoredRevision)
        case missing(RevisionID)
    }

    /// nil means `all`.
    static func requestedRevisions(_ context: RouteContext) throws(CouchError) -> [RevisionID]? {
        guard let raw = context.request.queryValue("open_revs") else { return nil }
        if raw == "all" { return nil }
        guard let array = try context.jsonOption("open_revs")?.arrayValue else {
            throw CouchError.badRequest("invalid value for open_revs: \(raw)")
        }
        return try array.map { value throws(CouchError) -> RevisionID in
            guard let text = value.stringValue, let revision = RevisionID(text) else {
                throw CouchError.badRequest("Invalid rev format")
            }
            return revision
        }
    }

    /// The revisions to send: every leaf for `all`; with `latest`, each requested
    /// revision's descendant leaves in its place.
    static func resolve(_ requested: [RevisionID]?, tree: RevisionTree, latest: Bool) -> [RevisionID] {
        guard let requested else { return tree.leaves.map(\.revision) }
        guard latest else { return requested }
        var seen = Set<RevisionID>()
        var result: [RevisionID] = []
        for revision in requested {
            let leaves = tree.contains(revision) ? tree.leaves(descendingFrom: revision).map(\.revision) : [revision]
            for leaf in leaves where seen.insert(leaf).inserted { result.append(leaf) }
        }
        return result
    }

    static func render(_ context: RouteContext, results: [Result], record: DocumentRecord? = nil,
                       options: DocumentRenderOptions) throws -> HTTPResponse {
        if context.request.acceptsMultipart("mixed") {
            var multipart = MultipartWriter()
            for result in results {
                switch result {
                case .found(let revision):
                    if let related = try MultipartDocument.related(revision, record: record, options: options) {
                        multipart.addPart(headers: [], nested: related, subtype: "related")
                    } else {
                        multipart.addPart(headers: [("Content-Type", "application/json")],
                                          body: try DocumentJSON.render(revision, record: record, options: options))
                    }
                case .missing(let revision):
                    multipart.addPart(headers: [("Content-Type", "application/json; error=\"true\"")],
                                      body: JSONValue.object(["missing": JSONValue(revision.description)]).serialized())
                }
            }
            return multipart.response(subtype: "mixed")
        }
        var output: [UInt8] = [UInt8(ascii: "[")]
        for (index, result) in results.enumerated() {
            if index > 0 { output.append(UInt8(ascii: ",")) }
            switch result {
            case .found(let revision):
                output.append(literal: #"{"ok":"#)
                try DocumentJSON.render(revision, record: record, options: options, into: &output)
                output.append(UInt8(ascii: "}"))
            case .missing(let revision):
                output.append(literal: #"{"missing":"#)
                JSONWriter.appendString(revision.description, to: &output)
                output.append(UInt8(ascii: "}"))
            }
        }
        output.append(literal: "]\n")
        return .json(200, bytes: output)
    }
}
