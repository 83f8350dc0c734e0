import CouchCore
import Foundation

extension Database {
    /// Drops the bodies of revisions that are no longer leaves (CouchDB serves `?rev=`
    /// of old revisions only until compaction) and stems the trees to `_revs_limit` (which may
    /// have been lowered since they were written), then gives the space back to the file system.
    /// Returns false if a compaction is already running.
    @discardableResult
    public func compact() throws -> Bool {
        guard setCompacting(true) else { return false }
        defer { _ = setCompacting(false) }
        try compactClaimed()
        return true
    }

    /// Compacts on a thread of its own, as CouchDB's `_compact` does: `compact_running` is
    /// true from the moment this returns until the compaction ends. False (and nothing
    /// started) if one is already running; `failed` hears a compaction's error.
    @discardableResult
    public func startCompaction(failed: @escaping @Sendable (Error) -> Void) -> Bool {
        guard setCompacting(true) else { return false }
        Thread.detachNewThread {
            defer { _ = self.setCompacting(false) }
            do { try self.compactClaimed() } catch { failed(error) }
        }
        return true
    }

    private func compactClaimed() throws {
        var lastKey = 0
        while true {
            let (processed, next) = try writer.perform { transaction in
                try self.compactBatch(after: lastKey, connection: transaction.connection)
            }
            if processed == 0 { break }
            lastKey = next
        }
        // VACUUM cannot run inside a transaction; it takes the writer's place for its duration,
        // which also keeps commits from adding references while unreferenced blobs are removed.
        try writer.performOutsideTransaction { connection in
            try connection.execute("VACUUM")
            try connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            _ = attachments.removeUnreferenced(keeping: try referencedBlobs(connection))
            try? recordPageSlack(connection)
        }
    }

    /// The free bytes inside the pages in use, measured once the file is dense (SQLite's
    /// `dbstat`, which reads every page, as `VACUUM` just did): `info()` subtracts it from the
    /// pages in use for `sizes.active`, as CouchDB's counts only live data, not B-tree slack.
    private func recordPageSlack(_ connection: SQLiteConnection) throws {
        guard let used = try connection.scalarInt("SELECT coalesce(sum(pgsize - unused), 0) FROM dbstat"),
              let pages = try connection.scalarInt("PRAGMA page_count"),
              let size = try connection.scalarInt("PRAGMA page_size") else { return }
        let (total, overflow) = pages.multipliedReportingOverflow(by: size)
        guard !overflow else { return }
        try connection.run("INSERT OR REPLACE INTO metadata (key, value) VALUES ('page_slack', ?)",
                           [.text(String(max(0, total - used)))])
    }

    /// Every blob key a stored revision refers to.
    private func referencedBlobs(_ connection: SQLiteConnection) throws -> Set<String> {
        var keys = Set<String>()
        for table in ["documents", "revision_bodies"] {
            try connection.query("SELECT attachments FROM \(table) WHERE attachments IS NOT NULL") { row in
                for attachment in AttachmentInfo.decode(row.blob(0)) { keys.insert(attachment.blobKey) }
            }
        }
        return keys
    }

    /// Compacts up to 500 documents with keys after `after`; returns how many and the last key.
    private func compactBatch(after: Int, connection: SQLiteConnection) throws -> (Int, Int) {
        var rows: [(key: Int, tree: RevisionTree, winner: RevisionID)] = []
        try connection.query(
            "SELECT doc_key, revision_tree, winning_rev FROM documents WHERE doc_key > ? ORDER BY doc_key LIMIT 500", [.int(after)]
        ) { row in
            rows.append((row.int(0), try decodeTree(row.blob(1)), try parseRevision(row, column: 2)))
        }
        let limit = revsLimit
        for row in rows {
            var tree = row.tree
            // Stemming keeps every leaf: what it removes are ancestors, whose bodies go below.
            var changed = !tree.stem(limit: limit).isEmpty
            for node in row.tree.nodes where node.hasBody && !row.tree.isLeaf(node.revision) {
                tree.setHasBody(false, for: node.revision)   // nothing when stemming removed it
                try connection.run("DELETE FROM revision_bodies WHERE doc_key = ? AND rev_id = ?",
                                   [.int(row.key), .text(node.revision.description)])
                changed = true
            }
            if changed {
                try connection.run("UPDATE documents SET revision_tree = ? WHERE doc_key = ?",
                                   [.blob(tree.encoded()), .int(row.key)])
            }
        }
        return (rows.count, rows.last?.key ?? after)
    }
}
