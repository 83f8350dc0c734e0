import CouchCore
import Foundation
import Logging

/// Reads and writes a replication's checkpoints on both peers, as CouchDB's replicator
/// does: both logs are read at the start and compared to find where to resume; a
/// checkpoint first asks both peers to commit (`_ensure_full_commit`) and checks they are
/// still the databases the session opened, then writes the same log to the source and
/// the target. Which sequence is safe to record is `SequenceMap`'s business, not this one's.
final class Checkpointer: @unchecked Sendable {
    private let source: DatabaseEndpoint
    private let target: DatabaseEndpoint
    private let documentID: DocumentID
    private let sessionID: String
    private let enabled: Bool
    private let hasDocumentIDs: Bool
    private let startTime = Date()
    private let logger: Logger

    private let lock = NSLock()
    private var sourceLog = ReplicationLog()
    private var targetLog = ReplicationLog()
    private var history: [JSONObject] = []
    private var startSequence = SourceSequence.zero
    private var committed: SourceSequence?
    private var sourceInstance: String?
    private var targetInstance: String?
    private var written: JSONObject?

    init(source: DatabaseEndpoint, target: DatabaseEndpoint, replicationID: ReplicationID, sessionID: String,
         enabled: Bool, hasDocumentIDs: Bool, logger: Logger) {
        self.source = source
        self.target = target
        documentID = replicationID.checkpointDocumentID
        self.sessionID = sessionID
        self.enabled = enabled
        self.hasDocumentIDs = hasDocumentIDs
        self.logger = logger
    }

    /// Reads both logs and returns where to start (`since_seq` overrides it).
    func start(sourceInfo: EndpointInfo, targetInfo: EndpointInfo,
               sinceSequence: SourceSequence?) async throws(ReplicationError) -> SourceSequence {
        let sourceLog = ReplicationLog(document: try await source.localDocument(documentID))
        let targetLog = ReplicationLog(document: try await target.localDocument(documentID))
        let (found, history) = ReplicationLog.startingPoint(source: sourceLog, target: targetLog)
        let start = sinceSequence ?? (enabled ? found : .zero)
        lock.withLock {
            self.sourceLog = sourceLog
            self.targetLog = targetLog
            self.history = history
            startSequence = start
            committed = start
            sourceInstance = sourceInfo.instanceStartTime
            targetInstance = targetInfo.instanceStartTime
        }
        if enabled, start != .zero { logger.info("resuming \(documentID) at source sequence \(start)") }
        return start
    }

    /// Records `sequence` on both peers unless it is already recorded. Returns whether a
    /// checkpoint was written.
    @discardableResult
    func checkpoint(through sequence: SourceSequence, statistics: ReplicationStatistics) async throws(ReplicationError) -> Bool {
        guard enabled else { return false }
        let (alreadyCommitted, history, startSequence, sourceInstance, targetInstance) = lock.withLock {
            (committed == sequence, self.history, self.startSequence, self.sourceInstance, self.targetInstance)
        }
        guard !alreadyCommitted else { return false }

        let targetTime: String?
        do {
            targetTime = try await target.ensureFullCommit()
        } catch {
            throw ReplicationError(.checkpointCommitFailure, "Failure on target commit: \(error.reason)")
        }
        let sourceTime: String?
        do {
            sourceTime = try await source.ensureFullCommit()
        } catch {
            throw ReplicationError(.checkpointCommitFailure, "Failure on source commit: \(error.reason)")
        }
        let sourceChanged = Self.differs(sourceInstance, sourceTime)
        let targetChanged = Self.differs(targetInstance, targetTime)
        switch (sourceChanged, targetChanged) {
        case (true, true): throw ReplicationError(.checkpointCommitFailure, "Source and target databases out of sync.")
        case (true, false): throw ReplicationError(.checkpointCommitFailure, "Source database out of sync.")
        case (false, true): throw ReplicationError(.checkpointCommitFailure, "Target database out of sync.")
        case (false, false): break
        }

        let body = ReplicationLog.nextBody(sessionID: sessionID, sequence: sequence, startSequence: startSequence,
                                           startTime: startTime, statistics: statistics, history: history,
                                           hasDocumentIDs: hasDocumentIDs)
        let (sourceRevision, targetRevision) = lock.withLock { (sourceLog.revision, targetLog.revision) }
        // Each side's new revision is kept as soon as it is written, so that a failure on the
        // other side does not leave a stale `_rev` behind for the next checkpoint.
        do {
            let revision = try await write(body, revision: sourceRevision, to: source)
            lock.withLock { sourceLog = ReplicationLog(body: body, revision: revision) }
        } catch {
            throw ReplicationError(.checkpointCommitFailure, "Error updating the source checkpoint document: \(error.reason)")
        }
        do {
            let revision = try await write(body, revision: targetRevision, to: target)
            lock.withLock { targetLog = ReplicationLog(body: body, revision: revision) }
        } catch {
            throw ReplicationError(.checkpointCommitFailure, "Error updating the target checkpoint document: \(error.reason)")
        }
        lock.withLock {
            committed = sequence
            written = body
        }
        logger.debug("recorded a checkpoint for \(source.displayName) -> \(target.displayName) at source sequence \(sequence)")
        return true
    }

    /// Writes the log; after a conflict (a retried request that had succeeded), accepts the
    /// stored document if it is the one being written, as CouchDB does.
    private func write(_ body: JSONObject, revision: String?, to endpoint: DatabaseEndpoint) async throws(ReplicationError) -> String {
        var document = body
        if let revision { document["_rev"] = JSONValue(revision) }
        do {
            return try await endpoint.putLocalDocument(documentID, document)
        } catch where error.kind == .checkpointCommitFailure && error.reason == "conflict" {
            let stored = ReplicationLog(document: try await endpoint.localDocument(documentID))
            guard stored.body == body, let storedRevision = stored.revision else { throw error }
            return storedRevision
        }
    }

    /// A commit's instance start time differs from the one seen at the start (CouchDB
    /// compares strictly; a peer that reports none is taken at its word).
    private static func differs(_ expected: String?, _ reported: String?) -> Bool {
        guard let expected, let reported else { return false }
        return expected != reported
    }

    /// The result of a finished one-shot replication, in CouchDB's shape: the last
    /// checkpoint's log, or, when this run recorded nothing, `no_changes` with the log found.
    var result: JSONObject {
        lock.lock()
        defer { lock.unlock() }
        guard enabled else { return ["use_checkpoints": false] }
        if let written { return written }
        var result: JSONObject = ["no_changes": true]
        for (key, value) in sourceLog.body { result[key] = value }
        return result
    }

    /// The counters of the history's latest entry, where a resumed replication counts on from.
    var historyStatistics: ReplicationStatistics {
        lock.withLock { history.first.map(ReplicationStatistics.init(history:)) ?? ReplicationStatistics() }
    }

    var committedSequence: SourceSequence? {
        lock.lock()
        defer { lock.unlock() }
        return committed
    }
}
