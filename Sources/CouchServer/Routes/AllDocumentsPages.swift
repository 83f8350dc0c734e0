import CouchCore
import CouchStore

/// An `_all_docs` listing's pages (`ListingStream` sends them): up to `maximumRows` rows a
/// page, and a page ends early once it holds `pageBytes` (a listing of 1 MB documents held
/// 500 MB a page). Smaller pages were measured slower: each is a query and a hand-over
/// between threads.
final class AllDocumentsPages: ListingPages {
    private let database: Database
    private var query: AllDocumentsQuery
    private let includeDocs: Bool
    private let render: DocumentRenderOptions
    private let updateSequence: Int?
    private var remaining: Int
    private var written = 0
    private var started = false
    /// Whether rows may be written from their stored bytes: with no document, or one shown as
    /// stored (no reader's restriction, no conflicts).
    private let writesStoredBytes: Bool
    /// The ID of the page's last row so far (the next page starts after it).
    private var lastID: [UInt8] = []
    private static let maximumRows = 500
    private static let pageBytes = 1024 * 1024
    /// Rows whose attachments are written inline are read whole, a few at a time.
    private static let rowsWithInlineAttachments = 16
    private struct PageFull: Error {}

    init(database: Database, query: AllDocumentsQuery, includeDocs: Bool, render: DocumentRenderOptions,
         updateSequence: Int?) {
        self.database = database
        self.query = query
        self.includeDocs = includeDocs
        self.render = render
        self.updateSequence = updateSequence
        remaining = query.limit ?? Int.max
        writesStoredBytes = !includeDocs || (!render.reader.isRestricted && !query.includeTree)
    }

    /// The head of the answer; `offset` is null for a `keys` query, as CouchDB 3 answers it.
    static func prelude(total: Int, offset: Int?, updateSequence: Int?) -> [UInt8] {
        var text = #"{"total_rows":\#(total),"offset":\#(offset.map(String.init) ?? "null")"#
        if let updateSequence { text += #","update_seq":\#(UpdateSequence(updateSequence).json.serializedString())"# }
        return Array((text + #","rows":["#).utf8)
    }

    static let epilogue = Array("\n]}\n".utf8)

    /// A row from its stored bytes when nothing in it needs them parsed, else from its row.
    private func append(_ listed: ListedDocument, to page: inout [UInt8]) throws {
        guard writesStoredBytes, !listed.isDeleted, !(includeDocs && listed.hasAttachments),
              RevisionID.isWrittenAsStored(listed.revision) else {
            return try append(listed.row(), body: listed.body, to: &page)
        }
        page.append(literal: written == 0 ? "\n" : ",\n")
        AllDocumentsRoute.RowOutput.write(storedID: listed.id, revision: listed.revision,
                                          body: includeDocs ? listed.body : nil, to: &page)
        written += 1
    }

    private func append(_ row: AllDocumentsRow, body: UnsafeRawBufferPointer?, to page: inout [UInt8]) throws {
        page.append(literal: written == 0 ? "\n" : ",\n")
        try AllDocumentsRoute.RowOutput(key: nil, row: row)
            .write(to: &page, includeDocs: includeDocs, render: render, body: includeDocs ? body : nil)
        written += 1
    }

    func nextPage(into output: inout [UInt8]) throws -> Bool {
        if !started {
            started = true
            let position = try database.allDocumentsPosition(query)
            output = Self.prelude(total: position.total, offset: position.offset, updateSequence: updateSequence)
        }
        var page = query
        var count = 0
        var last: String?
        var full = false
        if remaining > 0 && render.attachments.mode == .stubs {
            // Rows go from the statement into the output, each body copied once. (Inline
            // attachments read the attachment store, so they take the path below.)
            page.limit = min(Self.maximumRows, remaining)
            let start = output.count
            do {
                try database.forEachDocument(page) { listed in
                    try append(listed, to: &output)
                    count += 1
                    lastID.removeAll(keepingCapacity: true)
                    lastID.append(contentsOf: listed.id)
                    if output.count - start >= Self.pageBytes { throw PageFull() }
                }
            } catch is PageFull {
                full = true
            }
            if count > 0 { last = String(decoding: lastID, as: UTF8.self) }
        } else if remaining > 0 {
            page.limit = min(Self.rowsWithInlineAttachments, remaining)
            let rows = try database.allDocuments(page)
            for row in rows { try append(row, body: nil, to: &output) }
            count = rows.count
            last = rows.last?.id.rawValue
        }
        remaining -= count
        query.skip = 0
        query.after = last ?? query.after
        guard remaining == 0 || (!full && count < page.limit ?? 0) else { return false }
        output.append(contentsOf: Self.epilogue)
        return true
    }
}
