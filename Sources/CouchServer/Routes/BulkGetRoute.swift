import CouchCore
import CouchStore

/// `POST /db/_bulk_get`: many revisions of many documents in one request, with their
/// histories (`revs=true`), as JSON or `multipart/mixed`, read in batches (`BatchReader`).
/// Answered off the listener
/// (`OffThreadAnswer`), in time linear in the documents asked for, and stopped when its
/// client hangs up (`RequestCancellation`, checked every `checkEvery` documents).
enum BulkGetRoute {
    struct Item {
        let id: DocumentID
        let revision: RevisionID?
    }

    enum Outcome {
        case found(StoredRevision, DocumentRecord)
        case failed(id: DocumentID, revision: RevisionID?, error: CouchError)
    }

    static let checkEvery = 64

    static func postBulkGet(_ context: RouteContext) throws -> HTTPResponse {
        let database = try context.database()
        let body = try context.jsonObjectBody()
        guard let docs = body["docs"]?.arrayValue else {
            throw CouchError.badRequest("Missing JSON list of 'docs'.")
        }
        let items = try docs.map { value throws(CouchError) -> Item in
            guard let object = value.objectValue, let id = object["id"]?.stringValue else {
                throw CouchError.badRequest("Each doc must be an object with an `id`")
            }
            var revision: RevisionID?
            if let text = object["rev"]?.stringValue {
                guard let parsed = RevisionID(text) else { throw CouchError.badRequest("Invalid rev format") }
                revision = parsed
            }
            return Item(id: DocumentID(id), revision: revision)
        }
        var options = DocumentRenderOptions(reader: try context.documentReadRule(for: database))
        options.revisions = try context.boolOption("revs") || body["revs"]?.boolValue == true
        options.attachments = try AttachmentRenderOptions(context, database: database)
        if body["attachments"]?.boolValue == true { options.attachments.mode = .data }
        let latest = try context.boolOption("latest") || body["latest"]?.boolValue == true
        let multipart = context.request.acceptsMultipart("mixed")
        // Every attachment's body, as CouchDB's `send_docs_multipart_bulk_get` sends them.
        if multipart { options.attachments.sendsAll() }
        return try database.readingInBatches { reader in
            let lookUp = { (item: Item) in try Self.lookUp(item, database: database, reader: reader, latest: latest) }
            return multipart ? try Self.multipart(items, lookUp: lookUp, options: options)
                             : try json(items, lookUp: lookUp, options: options)
        }
    }

    private static func lookUp(_ item: Item, database: Database, reader: BatchReader, latest: Bool) throws -> [Outcome] {
        do {
            try database.validatePartitioned(item.id)
        } catch {
            return [.failed(id: item.id, revision: item.revision, error: error)]
        }
        guard let revision = item.revision else {
            do {
                let snapshot = try reader.document(item.id)
                return [.found(snapshot.revision, snapshot.record)]
            } catch let error as CouchError {
                return [.failed(id: item.id, revision: nil, error: error)]
            }
        }
        guard let (record, revisions, stored) = try reader.revisions(item.id, choosing: {
            OpenRevisionsResponse.resolve([revision], tree: $0, latest: latest)
        }) else {
            return [.failed(id: item.id, revision: revision, error: .notFound("missing"))]
        }
        return zip(revisions, stored).map { revision, body in
            guard let body else { return .failed(id: item.id, revision: revision, error: .notFound("missing")) }
            return .found(body, record)
        }
    }

    /// Each document is written as it is read: the answer is all that grows with the request.
    private static func json(_ items: [Item], lookUp: (Item) throws -> [Outcome],
                             options: DocumentRenderOptions) throws -> HTTPResponse {
        var output: [UInt8] = Array(#"{"results": ["#.utf8)
        for (index, item) in items.enumerated() {
            if index % checkEvery == 0 { try RequestCancellation.checkCurrent() }
            if index == checkEvery { reserveForRest(&output, written: index, of: items.count) }
            if index > 0 { output.append(literal: ",\n") }
            output.append(literal: #"{"id":"#)
            JSONWriter.appendString(item.id.rawValue, to: &output)
            output.append(literal: #","docs":["#)
            for (position, outcome) in try lookUp(item).enumerated() {
                if position > 0 { output.append(UInt8(ascii: ",")) }
                switch outcome {
                case .found(let revision, let record):
                    output.append(literal: #"{"ok":"#)
                    try DocumentJSON.render(revision, record: record, options: options, into: &output)
                    output.append(UInt8(ascii: "}"))
                case .failed(let id, let revision, let error):
                    output.append(literal: #"{"error":"#)
                    errorObject(id: id, revision: revision, error: error).write(to: &output)
                    output.append(UInt8(ascii: "}"))
                }
            }
            output.append(literal: "]}")
        }
        output.append(literal: "]}\n")
        return .json(200, bytes: output)
    }

    /// Sets aside room for the whole answer, guessed from its first documents: grown by
    /// doubling, a batch of megabytes was copied and its pages faulted in about twice.
    private static func reserveForRest(_ output: inout [UInt8], written: Int, of count: Int) {
        let guess = output.count / written * count + output.count / 8
        output.reserveCapacity(min(guess, reservedAnswerLimit))
    }

    /// The most `reserveForRest` sets aside.
    private static let reservedAnswerLimit = 32 * 1024 * 1024

    private static func multipart(_ items: [Item], lookUp: (Item) throws -> [Outcome],
                                  options: DocumentRenderOptions) throws -> HTTPResponse {
        var writer = MultipartWriter()
        for (index, item) in items.enumerated() {
            if index % checkEvery == 0 { try RequestCancellation.checkCurrent() }
            for outcome in try lookUp(item) {
                switch outcome {
                case .found(let revision, let record):
                    if let related = try MultipartDocument.related(revision, record: record, options: options) {
                        writer.addPart(headers: [], nested: related, subtype: "related")
                    } else {
                        writer.addPart(headers: [("Content-Type", "application/json")],
                                       body: try DocumentJSON.render(revision, record: record, options: options))
                    }
                case .failed(let id, let revision, let error):
                    writer.addPart(headers: [("Content-Type", "application/json; error=\"true\"")],
                                   body: errorObject(id: id, revision: revision, error: error).serialized())
                }
            }
        }
        return writer.response(subtype: "mixed")
    }

    private static func errorObject(id: DocumentID, revision: RevisionID?, error: CouchError) -> JSONValue {
        ["id": JSONValue(id.rawValue), "rev": revision.map { JSONValue($0.description) } ?? .null,
         "error": JSONValue(error.error), "reason": JSONValue(error.reason)]
    }
}
