import CouchCore
import Logging

/// The third stage: reads missing revisions from the source with `_bulk_get`, falling
/// back to `open_revs` (one request per document, a few at once) for peers without it and
/// for documents `_bulk_get` could not return. Revisions that have attachments are set
/// aside for the attachment road (`AttachedRevisionCopier`), which fetches them again
/// with their bodies, as CouchDB's replicator does.
struct RevisionFetcher: Sendable {
    let source: DatabaseEndpoint
    let logger: Logger
    /// Attachments on demand: revisions with attachments are written as fetched, their
    /// stubs kept (bodies absent), rather than set aside for the attachment road.
    var keepsStubs = false
    /// `open_revs` requests in flight at once per batch.
    static let concurrentDocuments = 8

    struct Result: Sendable {
        var revisions: [ReplicatedRevision] = []
        var withAttachments: [RevisionRequest] = []
        var bulkGetAttempts = 0
        var bulkGetDocs = 0
        var failures: [WriteFailure] = []
    }

    func fetch(_ requests: [RevisionRequest]) async throws(ReplicationError) -> Result {
        var result = Result()
        var retry: [RevisionRequest] = []
        do {
            let fetched = try await source.bulkGet(requests)
            result.bulkGetAttempts = requests.count
            let byKey = Dictionary(requests.map { (Key($0.id, $0.revision), $0) }, uniquingKeysWith: { first, _ in first })
            var failedIDs = Set<DocumentID>()
            for entry in fetched {
                switch entry {
                case .found(let revision):
                    result.bulkGetDocs += 1
                    accept(revision, request: byKey[Key(revision.id, revision.revision)], into: &result)
                case .missing:
                    break
                case .failed(let id, _, _):
                    failedIDs.insert(id)
                }
            }
            retry = requests.filter { failedIDs.contains($0.id) }
        } catch where error.kind == .notImplemented {
            retry = requests
        }
        if !retry.isEmpty { try await fetchOneByOne(retry, into: &result) }
        return result
    }

    private struct Key: Hashable {
        let id: DocumentID
        let revision: RevisionID
        init(_ id: DocumentID, _ revision: RevisionID) {
            self.id = id
            self.revision = revision
        }
    }

    private func accept(_ revision: ReplicatedRevision, request: RevisionRequest?, into result: inout Result) {
        if revision.hasAttachments && !keepsStubs {
            result.withAttachments.append(RevisionRequest(id: revision.id, revision: revision.revision,
                                                          attachmentsSince: request?.attachmentsSince ?? []))
        } else {
            result.revisions.append(revision)
        }
    }

    /// `open_revs` per document, `concurrentDocuments` at a time.
    private func fetchOneByOne(_ requests: [RevisionRequest], into result: inout Result) async throws(ReplicationError) {
        var order: [DocumentID] = []
        var byID: [DocumentID: [RevisionRequest]] = [:]
        for request in requests {
            if byID[request.id] == nil { order.append(request.id) }
            byID[request.id, default: []].append(request)
        }
        let source = self.source
        var start = 0
        while start < order.count {
            let slice = order[start..<min(order.count, start + Self.concurrentDocuments)]
            start += slice.count
            let answers: [(DocumentID, Swift.Result<[FetchResult], ReplicationError>)] = await withTaskGroup(
                of: (DocumentID, Swift.Result<[FetchResult], ReplicationError>).self
            ) { group in
                for id in slice {
                    let revisions = byID[id]!.map(\.revision)
                    group.addTask {
                        do {
                            return (id, .success(try await source.openRevisions(id, revisions)))
                        } catch let error as ReplicationError {
                            return (id, .failure(error))
                        } catch {
                            return (id, .failure(ReplicationError(.stopped, "stopped")))
                        }
                    }
                }
                var collected: [(DocumentID, Swift.Result<[FetchResult], ReplicationError>)] = []
                for await answer in group { collected.append(answer) }
                return collected
            }
            for (id, answer) in answers {
                let fetched = try answer.get()
                for entry in fetched {
                    switch entry {
                    case .found(let revision):
                        accept(revision, request: byID[id]?.first { $0.revision == revision.revision }, into: &result)
                    case .missing:
                        break
                    case .failed(let id, let revision, let reason):
                        logger.error("could not fetch \(id.rawValue) \(revision?.description ?? "") from \(source.displayName): \(reason)")
                        result.failures.append(WriteFailure(id: id, revision: revision, error: "fetch_failed", reason: reason))
                    }
                }
            }
        }
    }
}
