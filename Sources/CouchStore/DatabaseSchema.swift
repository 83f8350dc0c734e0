import CouchCore

/// Named, ordered schema migrations. A database records which ones it has run in
/// `metadata`; each runs once, in its own transaction.
enum DatabaseSchema {
    struct Migration {
        let name: String
        let sql: String
    }

    static let migrations: [Migration] = [
        Migration(name: "v1-documents", sql: """
            CREATE TABLE metadata (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
            CREATE TABLE documents (
                doc_key INTEGER PRIMARY KEY,
                doc_id TEXT NOT NULL UNIQUE,
                sequence INTEGER NOT NULL UNIQUE,
                deleted INTEGER NOT NULL,
                winning_rev TEXT NOT NULL,
                body BLOB NOT NULL,
                revision_tree BLOB NOT NULL
            );
            CREATE TABLE revision_bodies (
                doc_key INTEGER NOT NULL,
                rev_id TEXT NOT NULL,
                body BLOB NOT NULL,
                PRIMARY KEY (doc_key, rev_id)
            ) WITHOUT ROWID;
            CREATE TABLE local_documents (
                doc_id TEXT PRIMARY KEY,
                revision INTEGER NOT NULL,
                body BLOB NOT NULL
            ) WITHOUT ROWID;
            """),
        // Attachment metadata (JSON: name → content_type, length, digest, revpos, blob key)
        // beside each stored body.
        Migration(name: "v2-attachments", sql: """
            ALTER TABLE documents ADD COLUMN attachments BLOB;
            ALTER TABLE revision_bodies ADD COLUMN attachments BLOB;
            """),
        // Document counts kept by every write, so database info never scans the documents.
        Migration(name: "v3-document-counts", sql: """
            INSERT OR REPLACE INTO metadata (key, value) SELECT 'doc_count', count(*) FROM documents WHERE deleted = 0;
            INSERT OR REPLACE INTO metadata (key, value) SELECT 'doc_del_count', count(*) FROM documents WHERE deleted = 1;
            INSERT OR REPLACE INTO metadata (key, value)
                SELECT 'external_size', coalesce(sum(length(body)), 0) FROM documents WHERE deleted = 0;
            """),
        // Purges: the revisions removed by each (`_purged_infos`), numbered by `purge_seq`.
        Migration(name: "v4-purges", sql: """
            CREATE TABLE purged_infos (purge_seq INTEGER PRIMARY KEY, doc_id TEXT NOT NULL, revs TEXT NOT NULL);
            """),
        // The IDs of deleted documents: `_all_docs`' offset counts the IDs before its start key
        // in `doc_id`'s own index, then takes away the deleted ones found here. (Counting live
        // rows read every row's `deleted` from the table: 0.3 s at 500,000, ten times the count
        // of IDs.) Live documents, most of them, add nothing to it.
        Migration(name: "v5-deleted-ids", sql: """
            CREATE INDEX deleted_ids ON documents (doc_id) WHERE deleted = 1;
            """),
    ]

    static func configure(_ connection: SQLiteConnection) throws(CouchError) {
        try connection.execute("PRAGMA journal_mode=WAL")
        // FULL: in WAL mode NORMAL may lose the last commits on power loss; an
        // acknowledged write must survive a crash.
        try connection.execute("PRAGMA synchronous=FULL")
        try connection.execute("PRAGMA foreign_keys=OFF")
        // The log is kept when the database closes (see SQLiteConnection.init): cut back
        // whenever a checkpoint empties it, rather than stay at its largest after a large
        // commit. Not below what one checkpoint cycle fills (1,000 pages of 4 KiB and a commit
        // past them): a log cut shorter grows again in every cycle, and each commit that
        // lengthens the file makes its sync commit the file system's journal as well (a
        // single-document commit then took 35-45% longer).
        try connection.execute("PRAGMA journal_size_limit=\(6 << 20)")
        connection.deferCheckpoints()
    }

    static func migrate(_ connection: SQLiteConnection) throws(CouchError) {
        let hasMetadata = try connection.scalarInt(
            "SELECT count(*) FROM sqlite_master WHERE type='table' AND name='metadata'") ?? 0
        var applied: Set<String> = []
        if hasMetadata > 0 {
            try? connection.query("SELECT value FROM metadata WHERE key LIKE 'migration:%'") { applied.insert($0.text(0)) }
        }
        let pending = migrations.filter { !applied.contains($0.name) }
        guard !pending.isEmpty else { return }
        // All in one transaction: a new database is created with one sync, not one per migration.
        try connection.execute("BEGIN IMMEDIATE")
        do {
            for migration in pending {
                try connection.execute(migration.sql)
                try connection.run("INSERT INTO metadata (key, value) VALUES (?, ?)",
                                   [.text("migration:\(migration.name)"), .text(migration.name)])
            }
            try connection.execute("COMMIT")
        } catch {
            try? connection.execute("ROLLBACK")
            throw error
        }
    }
}
