import CouchCore
import CouchStore

/// Writes one `_changes` row the way CouchDB does:
/// `{"seq":"N-…","id":"…","changes":[{"rev":"…"}],"deleted":true,"doc":{…}}`.
struct ChangeRowWriter: Sendable {
    let allLeaves: Bool
    let includeDocs: Bool
    /// How `doc` is written: made once, not for every row.
    private let render: DocumentRenderOptions

    init(allLeaves: Bool, includeDocs: Bool, conflicts: Bool, attachments: AttachmentRenderOptions,
         reader: DocumentReadRule) {
        self.allLeaves = allLeaves
        self.includeDocs = includeDocs
        var render = DocumentRenderOptions(reader: reader)
        render.conflicts = conflicts
        render.attachments = attachments
        self.render = render
    }

    /// `body`: the stored body when borrowed from the statement (`row.body` is then nil).
    func append(_ row: ChangeRow, body borrowed: UnsafeRawBufferPointer? = nil, to output: inout [UInt8]) throws {
        output.append(literal: #"{"seq":"#)
        UpdateSequence(row.sequence).appendJSON(to: &output)
        output.append(literal: #","id":"#)
        JSONWriter.appendString(row.id.rawValue, to: &output)
        output.append(literal: #","changes":["#)
        if allLeaves, let leaves = row.tree?.leaves {
            for (index, leaf) in leaves.enumerated() {
                if index > 0 { output.append(UInt8(ascii: ",")) }
                Self.appendChange(leaf.revision, to: &output)
            }
        } else {
            Self.appendChange(row.winner, to: &output)  // the usual row: no array of one
        }
        output.append(UInt8(ascii: "]"))
        if row.isDeleted { output.append(literal: #","deleted":true"#) }
        if includeDocs, borrowed != nil || row.body != nil {
            output.append(literal: #","doc":"#)
            let revision = StoredRevision(id: row.id, revision: row.winner, isDeleted: row.isDeleted, body: row.body ?? [],
                                          attachments: row.attachments)
            let record = row.tree.map {
                DocumentRecord(id: row.id, sequence: row.sequence, tree: $0, winner: row.winner, isDeleted: row.isDeleted)
            }
            try DocumentJSON.renderListed(revision, borrowedBody: borrowed, record: record, options: render, into: &output)
        }
        output.append(UInt8(ascii: "}"))
    }

    /// Whether `appendStored` writes this change as `append` writes its parsed row: its winning
    /// revision alone, stored as written, and no document or one shown as stored (live, without
    /// attachments or conflicts, to a reader without restrictions).
    func writesStoredBytes(of listed: ListedDocument) -> Bool {
        !allLeaves && !render.conflicts && RevisionID.isWrittenAsStored(listed.revision)
            && (!includeDocs || (!render.reader.isRestricted && !listed.isDeleted && !listed.hasAttachments))
    }

    /// The change from its stored bytes, without parsing its ID or revision (`writesStoredBytes`).
    func appendStored(_ listed: ListedDocument, to output: inout [UInt8]) {
        output.append(literal: #"{"seq":"#)
        UpdateSequence(listed.sequence).appendJSON(to: &output)
        output.append(literal: #","id":"#)
        JSONWriter.appendString(utf8: listed.id, to: &output)
        output.append(literal: #","changes":[{"rev":""#)
        output.append(contentsOf: listed.revision)
        output.append(literal: #""}]"#)
        if listed.isDeleted { output.append(literal: #","deleted":true"#) }
        if includeDocs {
            output.append(literal: #","doc":"#)
            DocumentJSON.appendStored(id: listed.id, revision: listed.revision, body: listed.body, to: &output)
        }
        output.append(UInt8(ascii: "}"))
    }

    private static func appendChange(_ revision: RevisionID, to output: inout [UInt8]) {
        output.append(literal: #"{"rev":"#)
        revision.appendJSON(to: &output)
        output.append(UInt8(ascii: "}"))
    }
}
