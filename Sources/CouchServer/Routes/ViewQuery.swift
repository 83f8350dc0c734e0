import CouchCore
import CouchFunctions
import CouchIndex
import CouchStore

/// One view query, ready to answer: the index brought up to date as `update` asks, the head
/// (`total_rows`, `offset`, `update_seq`) known, rows produced a page at a time as JSON
/// (`{"id","key","value"[,"doc"]}` for a map query, `{"key","value"}` for a reduce). The
/// view route streams it; `_list` reads it row by row.
final class ViewQuery: @unchecked Sendable {
    let isReduce: Bool
    /// `total_rows` and `offset` (map queries only).
    let totalRows: Int?
    let offset: Int?
    /// The index's sequence when `update_seq=true` was asked.
    let updateSequence: Int?

    private let database: Database
    private let index: ViewIndex
    private let view: Int
    private let options: ViewQueryOptions
    private let render: DocumentRenderOptions
    private var ranges: [ViewRange]
    private var rangeIndex = 0
    private var after: ViewPosition?
    private var skip: Int
    private var remaining: Int
    private var reduced: [[UInt8]]?
    private let partition: String?
    /// Rows read at a time: up to `maximumRows`, fewer when they are large, so that a page
    /// stays near `pageBytes`, as `_all_docs`'s pages do (known once a page is written: with
    /// documents, the first page is small).
    private lazy var rowsPerPage = options.includeDocs ? 64 : Self.maximumRows
    private static let maximumRows = 500
    private static let pageBytes = 1024 * 1024

    /// Opens `viewName` of `design` for `options`: CouchDB's 404 for a missing view, 400s for
    /// parameters the view does not allow.
    /// `partition`: a partitioned design document's view is only queried for one partition
    /// (`/db/_partition/{p}/_design/...`), reading that partition's key range of the index.
    init(context: RouteContext, database: Database, design: DesignDocument, viewName: String,
         options given: ViewQueryOptions, partition: String? = nil) throws {
        let views = JavaScriptViews(design: design, database: database.name, runtime: context.server.functions,
                                    partitioned: database.isPartitioned)
        switch (views.definition.partitioned, partition) {
        case (true, nil):
            throw CouchError(.queryParseError, "`partition` parameter is mandatory for queries to this view.")
        case (false, _?):
            throw CouchError(.queryParseError, "`partition` parameter is not supported in this design doc")
        default:
            break
        }
        guard let position = views.views.firstIndex(where: { $0.name == viewName }) else {
            try design.refuseUnrunnableLanguage("views", viewName)
            throw CouchError.notFound("missing_named_view")
        }
        let functions = views.views[position]
        var options = given
        try options.validate(viewReduces: functions.reduce != nil, collation: views.definition.collation(position))
        if partition != nil {
            // CouchDB's `[query_server_config] partition_query_limit`: the default and the most.
            let most = context.server.configuration.partitionQueryLimit
            if let limit = options.limit, limit > most {
                throw CouchError(.queryParseError, "Limit is too large, must not exceed \(most)")
            }
            options.limit = options.limit ?? most
            options.range.partition = partition
        }
        self.partition = partition
        self.options = options
        self.database = database
        view = position
        index = try context.server.indexes.index(for: views.definition, in: database)
        switch options.update {
        case .yes: try index.update(from: database)
        case .lazy: context.server.indexes.updateSoon(index, database: database)
        case .no: break
        }
        var render = DocumentRenderOptions(reader: try context.documentReadRule(for: database))
        render.conflicts = options.conflicts ?? false
        render.attachments = try AttachmentRenderOptions(context, database: database)
        if options.attachments { render.attachments.mode = .data }
        if options.attachmentEncodingInfo { render.attachments.encodingInfo = true }
        self.render = render
        isReduce = options.reduces(viewReduces: functions.reduce != nil)
        ranges = Self.keysOrRange(options)
        skip = options.skip
        remaining = options.limit ?? Int.max
        updateSequence = options.updateSequence ? index.updateSequence : nil
        if isReduce, let source = functions.reduce {
            guard views.definition.reductions[position] != nil else {
                throw CouchError(.queryParseError, "Unknown built-in reduce function: \(source)")
            }
            totalRows = nil
            offset = nil
            // Reduced here, so a reduce that fails answers its error with its status.
            reduced = try reduceRows()
        } else {
            let index = self.index
            var partitionRange = ViewRange()
            partitionRange.partition = partition
            let total = partition == nil ? try index.totalRows(view: position) : try index.count(view: position, range: partitionRange)
            totalRows = total
            let first = Self.keysOrRange(options).first
            let before = try first.map { range throws(CouchError) in try index.offset(view: position, range: range) } ?? 0
            // `skip` is any non-negative Int a client sent: saturate rather than trap.
            offset = min(total, before.addingReportingOverflow(options.skip).overflow ? Int.max : before + options.skip)
        }
    }

    /// One range per key of `keys` (the query's range with that key at both ends: its
    /// `startkey_docid`, `endkey_docid`, `inclusive_end` and direction apply to each, as
    /// CouchDB's `key_opts`), else the query's range.
    private static func keysOrRange(_ options: ViewQueryOptions) -> [ViewRange] {
        guard let keys = options.keys else { return [options.range] }
        return keys.map { key in
            var range = options.range
            range.startKey = key
            range.endKey = key
            return range
        }
    }

    /// The JSON before the rows: `{"total_rows":N,"offset":M[,"update_seq":S],"rows":[`.
    var prelude: [UInt8] {
        var text = "{"
        if let totalRows, let offset { text += #""total_rows":\#(totalRows),"offset":\#(offset),"# }
        if let updateSequence { text += #""update_seq":\#(UpdateSequence(updateSequence).json.serializedString()),"# }
        return Array((text + #""rows":["#).utf8)
    }

    /// Whether `nextRows` has nothing more to answer (so a listing can end without asking it again).
    var isExhausted: Bool {
        isReduce ? reduced?.isEmpty == true : rangeIndex >= ranges.count || remaining <= 0
    }

    /// The next rows, each its own JSON (`_list` hands them to its function one at a time), or
    /// nil when there are no more.
    func nextRows() throws -> [[UInt8]]? {
        var bytes: [UInt8] = []
        var starts: [Int] = []
        guard try appendNextRows(to: &bytes, separator: { starts.append($0.count) }) else { return nil }
        return zip(starts, starts.dropFirst() + [bytes.count]).map { Array(bytes[$0..<$1]) }
    }

    /// Writes the next rows into `output`, `separator` before each (a page of a listing is
    /// written where it is sent from: a row with its document is a kilobyte or more, and each copy
    /// of it counted); false when there are no more.
    func appendNextRows(to output: inout [UInt8], separator: (inout [UInt8]) -> Void) throws -> Bool {
        if isReduce {
            if reduced == nil { reduced = try reduceRows() }
            guard let rows = reduced, !rows.isEmpty else { return false }
            reduced = []
            for row in rows {
                separator(&output)
                output += row
            }
            return true
        }
        while rangeIndex < ranges.count, remaining > 0 {
            let range = ranges[rangeIndex]
            if skip > 0, ranges.count > 1, after == nil {
                // Several ranges (`keys`): a range shorter than what is left to skip is passed whole.
                let count = try index.count(view: view, range: range)
                if count <= skip {
                    skip -= count
                    rangeIndex += 1
                    continue
                }
            }
            let wanted = min(rowsPerPage, remaining)
            let page = try index.rows(view: view, range: range, after: after, skip: skip, limit: wanted)
            skip = 0
            if page.count < wanted {
                rangeIndex += 1
                after = nil
            } else {
                after = page.last?.position
            }
            guard !page.isEmpty else { continue }
            remaining -= page.count
            let start = output.count
            try append(page, to: &output, separator: separator)
            let rowBytes = max(1, (output.count - start) / page.count)
            rowsPerPage = min(Self.maximumRows, max(1, Self.pageBytes / rowBytes))
            return true
        }
        return false
    }

    // MARK: Map rows

    private func append(_ page: [ViewRow], to output: inout [UInt8], separator: (inout [UInt8]) -> Void) throws {
        guard options.includeDocs else {
            for row in page {
                separator(&output)
                appendHead(of: row, to: &output)
                output.append(UInt8(ascii: "}"))
            }
            return
        }
        let links = page.map(Self.link)
        let pinned = try documentsAtRevisions(links)
        var position = 0
        // Each row written as its document is read, the document from its stored bytes.
        try database.forEachDocument(ids: links.map(\.id), includeBodies: true, includeTree: render.conflicts) { listed in
            defer { position += 1 }
            separator(&output)
            appendHead(of: page[position], to: &output)
            output.append(literal: #","doc":"#)
            if links[position].revision != nil {
                if let document = pinned[position] {
                    try DocumentJSON.renderListed(document.revision, record: document.record, options: render, into: &output)
                } else {
                    output.append(literal: "null")
                }
            } else if let listed, !listed.isDeleted {
                try appendDocument(listed, to: &output)
            } else {
                output.append(literal: "null")
            }
            output.append(UInt8(ascii: "}"))
        }
    }

    /// `{"id":…,"key":…,"value":…` (the row's end is its caller's).
    private func appendHead(of row: ViewRow, to output: inout [UInt8]) {
        output.append(literal: #"{"id":"#)
        JSONWriter.appendString(row.id.rawValue, to: &output)
        output.append(literal: #","key":"#)
        output += row.keyJSON
        output.append(literal: #","value":"#)
        output += row.valueJSON
    }

    /// A live document as `include_docs` shows it: from its stored bytes when it is shown as
    /// stored (no reader's restriction, no conflicts asked, no attachments), else rendered.
    private func appendDocument(_ listed: ListedDocument, to output: inout [UInt8]) throws {
        if !render.reader.isRestricted, !render.conflicts, !listed.hasAttachments,
           RevisionID.isWrittenAsStored(listed.revision) {
            return DocumentJSON.appendStored(id: listed.id, revision: listed.revision, body: listed.body, to: &output)
        }
        let row = listed.row()
        let revision = StoredRevision(id: row.id, revision: row.winner, isDeleted: false, body: [],
                                      attachments: row.attachments)
        let record = row.tree.map { DocumentRecord(id: row.id, sequence: row.sequence, tree: $0, winner: row.winner, isDeleted: false) }
        try DocumentJSON.renderListed(revision, borrowedBody: listed.body, record: record, options: render, into: &output)
    }

    /// What a value that links a document must hold: `"_id"`, `"_rev"`, or an escape that could spell one.
    private static let linkMarkers = [#""_id""#, #""_rev""#, #"\u"#].map { Array($0.utf8) }

    /// The document a row links (`include_docs`): its own, or the one an object value names
    /// with `_id` and/or `_rev` (that document at that revision), as CouchDB's `docid_rev`
    /// links them.
    private static func link(_ row: ViewRow) -> (id: DocumentID, revision: RevisionID?) {
        // Most values name neither: parsed only when their text could.
        guard row.valueJSON.first == UInt8(ascii: "{"),
              linkMarkers.contains(where: { row.valueJSON.firstRange(of: $0) != nil }),
              case .object(let value) = row.value, value["_id"] != nil || value["_rev"] != nil else {
            return (row.id, nil)
        }
        return (value["_id"]?.stringValue.map(DocumentID.init) ?? row.id, value["_rev"]?.stringValue.flatMap(RevisionID.init))
    }

    /// The documents of the rows linked at a revision, by row (missing or deleted: none).
    private func documentsAtRevisions(_ links: [(id: DocumentID, revision: RevisionID?)]) throws
        -> [Int: (revision: StoredRevision, record: DocumentRecord?)] {
        var documents: [Int: (revision: StoredRevision, record: DocumentRecord?)] = [:]
        for (position, link) in links.enumerated() where link.revision != nil {
            guard let snapshot = try? database.document(link.id, revision: link.revision) else { continue }
            documents[position] = (snapshot.revision, snapshot.record)
        }
        return documents
    }

    // MARK: Reduce rows

    /// Every group's row, in order, after `skip` and within `limit`, from the index's stored
    /// reductions.
    private func reduceRows() throws -> [[UInt8]] {
        let level: Int?
        switch try options.groupLevelSetting() {
        case .exact: level = nil
        case .level(let depth): level = depth
        }
        let groups = try index.reduce(view: view, ranges: ranges, groupLevel: level, skip: options.skip,
                                      limit: options.limit ?? Int.max)
        return groups.map { group in
            switch group {
            case .group(let key, let value):
                var row: [UInt8] = Array(#"{"key":"#.utf8)
                key.write(to: &row)
                row += Array(#","value":"#.utf8)
                value.write(to: &row)
                row.append(UInt8(ascii: "}"))
                return row
            case .overflow(let reason):
                return JSONValue.object(JSONObject([(key: "key", value: .null),
                                                    (key: "error", value: JSONValue(ViewReduction.overflowName)),
                                                    (key: "reason", value: JSONValue(reason))])).serialized()
            }
        }
    }
}
