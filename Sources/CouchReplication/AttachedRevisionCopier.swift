import CouchCore
import Logging

/// The attachment road, after the fetcher set aside the revisions that have attachments:
/// each document is fetched again with the bodies of the attachments the target lacks
/// (those newer than the target's possible ancestors, CouchDB's `atts_since`), received
/// into the target's spool as they arrive, and its revisions written one at a time. A
/// target that answers `missing_stub` lacks the attachment a stub refers to (it has the
/// ancestor revision but not its body): that revision is fetched once more with every
/// attachment and written again. A few documents travel at once.
struct AttachedRevisionCopier: Sendable {
    let source: DatabaseEndpoint
    let target: DatabaseEndpoint
    let writer: RevisionWriter
    let logger: Logger
    /// Documents copied at once.
    static let concurrentDocuments = 4

    func copy(_ requests: [RevisionRequest]) async throws(ReplicationError) -> ReplicationStatistics {
        var order: [DocumentID] = []
        var byID: [DocumentID: (revisions: [RevisionID], since: [RevisionID])] = [:]
        for request in requests {
            if byID[request.id] == nil { order.append(request.id) }
            byID[request.id, default: ([], [])].revisions.append(request.revision)
            for ancestor in request.attachmentsSince where !byID[request.id]!.since.contains(ancestor) {
                byID[request.id]!.since.append(ancestor)
            }
        }
        let results = await withTaskGroup(of: Result<ReplicationStatistics, ReplicationError>.self) { group in
            var collected: [Result<ReplicationStatistics, ReplicationError>] = []
            for (index, id) in order.enumerated() {
                if index >= Self.concurrentDocuments, let done = await group.next() { collected.append(done) }
                let (revisions, since) = byID[id]!
                group.addTask {
                    do {
                        return .success(try await copyDocument(id, revisions, since: since))
                    } catch let error as ReplicationError {
                        return .failure(error)
                    } catch {
                        return .failure(ReplicationError(.stopped, "stopped"))
                    }
                }
            }
            for await done in group { collected.append(done) }
            return collected
        }
        // Every document ends before the batch does; the first real failure (rather than
        // the stops it caused) is the batch's.
        var statistics = ReplicationStatistics()
        var failure: ReplicationError?
        for result in results {
            switch result {
            case .success(let copied): statistics += copied
            case .failure(let error) where failure == nil || failure?.kind == .stopped: failure = error
            case .failure: break
            }
        }
        if let failure { throw failure }
        return statistics
    }

    private func copyDocument(_ id: DocumentID, _ revisions: [RevisionID],
                              since: [RevisionID]) async throws(ReplicationError) -> ReplicationStatistics {
        let spool = try target.attachmentSpool()
        let fetched = try await source.revisionsWithAttachments(id, revisions, attachmentsSince: since, spool: spool)
        var statistics = ReplicationStatistics()
        for fetchedRevision in fetched {
            // Never a stub the target could not resolve: the revision waits until its body is here.
            if let name = fetchedRevision.absentBody {
                writer.report(WriteFailure(id: id, revision: fetchedRevision.revision.revision, error: "attachment_not_downloaded",
                                           reason: "the body of attachment \(name) was not downloaded"))
                statistics.docWriteFailures += 1
                continue
            }
            let revision: ReplicatedRevision
            switch writer.prepared(fetchedRevision.revision) {
            case .success(let prepared): revision = prepared
            case .failure(let failure):
                writer.report(failure)
                statistics.docWriteFailures += 1
                continue
            }
            let attached = AttachedRevision(revision: revision, bodies: fetchedRevision.bodies)
            var failure = try await target.writeRevisionWithAttachments(attached)
            if let refused = failure, refused.error == "missing_stub", !since.isEmpty {
                logger.notice("\(target.displayName) lacks an attachment of \(id.rawValue) \(attached.revision.revision) (\(refused.reason)); sending all of them")
                let again = try await source.revisionsWithAttachments(id, [attached.revision.revision], attachmentsSince: [],
                                                                      spool: spool)
                if let full = again.first(where: { $0.revision.revision == attached.revision.revision }) ?? again.first {
                    switch writer.prepared(full.revision) {
                    case .success(let prepared):
                        failure = try await target.writeRevisionWithAttachments(AttachedRevision(revision: prepared, bodies: full.bodies))
                    case .failure(let refused):
                        failure = refused
                    }
                }
            }
            if let failure {
                writer.report(failure)
                statistics.docWriteFailures += 1
            } else {
                statistics.docsWritten += 1
            }
        }
        return statistics
    }
}
