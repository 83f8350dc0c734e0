import CouchCore
import CouchStore

/// The IDs of the documents a push job (local source) has not copied yet: those changed since
/// what has reached the target, through its filter. "Reached" is the running job's own mark
/// (every change up to its `through_seq` is written), else the checkpoint it recorded on the
/// source; answered from that and the local changes feed, without contacting the target (the
/// seeds' `isDocumentPending:`).
enum PendingDocuments {
    /// Nil while the job has no replication ID yet; throws `bad_request` for a job whose
    /// source is not a local database.
    static func of(_ settings: ReplicationSettings, manager: ReplicationManager,
                   databases: DatabaseManager) throws(CouchError) -> (since: JSONValue, ids: [String])? {
        guard case .local(let sourceName) = settings.source else {
            throw CouchError.badRequest("Pending documents are known for jobs whose source is a local database")
        }
        guard let replicationID = manager.knownReplicationID(for: settings) else { return nil }
        let source: Database
        do {
            source = try databases.database(sourceName)
        } catch {
            throw CouchError(.databaseNotFound, "could not open \(sourceName.rawValue)")
        }
        var since: JSONValue = 0
        if settings.useCheckpoints,
           let log = try? source.localDocument(DocumentID(DocumentID.localPrefix + replicationID.baseID)),
           let recorded = (try? JSONValue.parse(log.body))?["source_last_seq"] {
            since = recorded
        }
        let functions = manager.functions
        let filter = try settings.filter.map { filter throws(ReplicationError) in
            try LocalFilter(filter, database: source, functions: functions)
        }
        var after = SourceSequence(since).leadingInteger ?? 0
        // A running job knows more than its last checkpoint: what it wrote since.
        if let through = manager.replication(id: replicationID.jobID)?.status.throughSequence,
           let written = through.leadingInteger, written > after {
            after = written
            since = through.json
        }
        let rows: [ChangeRow]
        do {
            rows = try source.changes(ChangesQuery(since: after, includeBodies: filter?.needsDocument ?? false))
        } catch {
            throw CouchError.internalError("cannot read the changes of \(sourceName.rawValue)")
        }
        let accepted = try filter?.accepts(rows) ?? rows.map { _ in true }
        let ids = zip(rows, accepted).filter { !$0.0.id.isLocal && $0.1 }.map(\.0.id.rawValue)
        return (since, ids)
    }
}
