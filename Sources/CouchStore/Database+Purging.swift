import CouchCore
import Foundation

/// `_purge`: revisions removed as if they had never been written, from the tree and the
/// body store; each purge is numbered by `purge_seq` and listed in `purged_infos`, of which
/// the newest `purged_infos_limit` are kept.
extension Database {
    public static let defaultPurgedInfosLimit = 1000

    /// Purges the given leaf revisions of each document; answers, per document, the
    /// revisions that were leaves and are now gone. A document left with no revision is
    /// removed; one that keeps some gets a new sequence (so indexes see the change).
    public func purge(_ requests: [(DocumentID, [RevisionID])]) throws -> [(DocumentID, [RevisionID])] {
        let limit = purgedInfosLimit
        // A purged design document takes its functions and indexes with it.
        let touchesDesign = requests.contains { $0.0.isDesign }
        noteDesignWrite(touchesDesign)
        defer { noteDesignWrite(touchesDesign) }
        return try writer.perform { transaction in
            let connection = transaction.connection
            var results: [(DocumentID, [RevisionID])] = []
            var purgeSequence = try connection.scalarInt("SELECT max(purge_seq) FROM purged_infos") ?? 0
            purgeSequence = max(purgeSequence, try Self.metadataInt(connection, "purge_seq"))
            for (id, revisions) in requests {
                var row: (key: Int, tree: RevisionTree, winner: RevisionID, body: [UInt8], attachments: [UInt8], isDeleted: Bool)?
                try connection.query(
                    "SELECT doc_key, revision_tree, winning_rev, body, attachments, deleted FROM documents WHERE doc_id = ?",
                    [.text(id.rawValue)]
                ) { found in
                    row = (found.int(0), try decodeTree(found.blob(1)), try parseRevision(found, column: 2), found.blob(3),
                           found.blob(4), found.int(5) != 0)
                }
                guard let existing = row else {
                    results.append((id, []))
                    continue
                }
                var tree = existing.tree
                let (purged, removed) = tree.purge(Set(revisions))
                results.append((id, purged))
                guard !purged.isEmpty else { continue }
                purgeSequence += 1
                let revs = JSONValue.array(purged.map { JSONValue($0.description) }).serializedString()
                try connection.run("INSERT INTO purged_infos (purge_seq, doc_id, revs) VALUES (?, ?, ?)",
                                   [.int(purgeSequence), .text(id.rawValue), .text(revs)])
                for revision in removed {
                    try connection.run("DELETE FROM revision_bodies WHERE doc_key = ? AND rev_id = ?",
                                       [.int(existing.key), .text(revision.description)])
                }
                transaction.state.counts.count(existing.isDeleted, by: -1)
                transaction.state.counts.externalSize -= existing.isDeleted ? 0 : existing.body.count
                guard let winner = tree.winner else {
                    try connection.run("DELETE FROM revision_bodies WHERE doc_key = ?", [.int(existing.key)])
                    try connection.run("DELETE FROM documents WHERE doc_key = ?", [.int(existing.key)])
                    continue
                }
                var body: SQLiteValue = .blob(existing.body)
                var attachments: SQLiteValue = existing.attachments.isEmpty ? .null : .blob(existing.attachments)
                if winner.revision != existing.winner {
                    body = .blob(Array("{}".utf8))
                    attachments = .null
                    try connection.query("SELECT body, attachments FROM revision_bodies WHERE doc_key = ? AND rev_id = ?",
                                         [.int(existing.key), .text(winner.revision.description)]) { found in
                        body = .blob(found.blob(0))
                        attachments = found.isNull(1) ? .null : .blob(found.blob(1))
                    }
                    try connection.run("DELETE FROM revision_bodies WHERE doc_key = ? AND rev_id = ?",
                                       [.int(existing.key), .text(winner.revision.description)])
                    if tree.contains(existing.winner) {
                        try connection.run(
                            "INSERT OR REPLACE INTO revision_bodies (doc_key, rev_id, body, attachments) VALUES (?, ?, ?, ?)",
                            [.int(existing.key), .text(existing.winner.description), .blob(existing.body),
                             existing.attachments.isEmpty ? .null : .blob(existing.attachments)])
                    }
                }
                transaction.state.counts.count(winner.isDeleted, by: 1)
                transaction.state.counts.externalSize += winner.isDeleted ? 0 : body.byteCount
                try connection.run(
                    "UPDATE documents SET sequence = ?, deleted = ?, winning_rev = ?, body = ?, revision_tree = ?, attachments = ? WHERE doc_key = ?",
                    [.int(transaction.nextSequence()), .int(winner.isDeleted ? 1 : 0), .text(winner.revision.description),
                     body, .blob(tree.encoded()), attachments, .int(existing.key)])
            }
            try connection.run("INSERT OR REPLACE INTO metadata (key, value) VALUES ('purge_seq', ?)", [.text(String(purgeSequence))])
            try connection.run("DELETE FROM purged_infos WHERE purge_seq <= ?", [.int(purgeSequence - limit)])
            return results
        }
    }

    private static func metadataInt(_ connection: SQLiteConnection, _ key: String) throws -> Int {
        var value = 0
        try connection.query("SELECT value FROM metadata WHERE key = ?", [.text(key)]) { value = Int($0.text(0)) ?? 0 }
        return value
    }

    /// The number of purges made on this database.
    public var purgeSequence: Int {
        get throws { try readers.withConnection { try Self.metadataInt($0, "purge_seq") } }
    }

    /// How many purges `purged_infos` keeps (`_purged_infos_limit`, 1000 by default).
    public var purgedInfosLimit: Int {
        (try? readers.withConnection { connection -> Int in
            var value = Self.defaultPurgedInfosLimit
            try connection.query("SELECT value FROM metadata WHERE key = 'purged_infos_limit'") { value = Int($0.text(0)) ?? value }
            return value
        }) ?? Self.defaultPurgedInfosLimit
    }

    public func setPurgedInfosLimit(_ limit: Int) throws {
        guard limit > 0 else { throw CouchError.badRequest("`purged_infos_limit` must be positive integer") }
        try writer.perform { transaction in
            try transaction.connection.run("INSERT OR REPLACE INTO metadata (key, value) VALUES ('purged_infos_limit', ?)",
                                           [.text(String(limit))])
        }
    }

    /// The purges kept, oldest first: sequence, document and revisions.
    public func purgedInfos() throws -> [(sequence: Int, id: String, revisions: [String])] {
        try readers.withConnection { connection in
            var infos: [(sequence: Int, id: String, revisions: [String])] = []
            try connection.query("SELECT purge_seq, doc_id, revs FROM purged_infos ORDER BY purge_seq") { row in
                let revisions = (try? JSONValue.parse(Array(row.text(2).utf8)))?.arrayValue?.compactMap(\.stringValue) ?? []
                infos.append((row.int(0), row.text(1), revisions))
            }
            return infos
        }
    }
}
