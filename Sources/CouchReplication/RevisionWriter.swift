import CouchCore
import Logging

/// The last stage: writes fetched revisions to the target with `_bulk_docs` and
/// `new_edits=false`. A document the target refuses (its validation's 401/403, too
/// large, unsupported) is logged, counted in `doc_write_failures` and skipped; a batch
/// the target finds too large as a whole is split in halves until it fits.
struct RevisionWriter: Sendable {
    let target: DatabaseEndpoint
    let logger: Logger
    /// The embedding application's rewriting of bodies, applied to every revision written.
    var transform: DocumentTransform?
    var direction = DocumentTransform.Direction.between
    /// Attachments on demand (a local target): stubs no earlier revision backs are stored
    /// with their bodies absent.
    var keepsAbsentBodies = false

    /// A revision as it will be written (transformed when a transform is set), or the failure
    /// of its transformation.
    func prepared(_ revision: ReplicatedRevision) -> Swift.Result<ReplicatedRevision, WriteFailure> {
        guard let transform else { return .success(revision) }
        let (transformed, failures) = transform.apply([revision], direction: direction)
        if let failure = failures.first { return .failure(failure) }
        return .success(transformed[0])
    }

    struct Result: Sendable {
        var written = 0
        var failures = 0
    }

    func write(_ revisions: [ReplicatedRevision]) async throws(ReplicationError) -> Result {
        guard let transform else { return try await writeAll(revisions) }
        let (transformed, failures) = transform.apply(revisions, direction: direction)
        failures.forEach(report)
        var result = try await writeAll(transformed)
        result.failures += failures.count
        return result
    }

    private func writeAll(_ revisions: [ReplicatedRevision]) async throws(ReplicationError) -> Result {
        guard !revisions.isEmpty else { return Result() }
        do {
            let failures = if keepsAbsentBodies, let local = target as? LocalEndpoint {
                try await local.writeRevisions(revisions, keepingAbsentBodies: true)
            } else {
                try await target.writeRevisions(revisions)
            }
            for failure in failures { report(failure) }
            return Result(written: revisions.count - failures.count, failures: failures.count)
        } catch where error.kind == .requestBodyTooLarge {
            guard revisions.count > 1 else {
                report(WriteFailure(id: revisions[0].id, revision: revisions[0].revision,
                                    error: "request_body_too_large", reason: error.reason))
                return Result(written: 0, failures: 1)
            }
            let half = revisions.count / 2
            let first = try await writeAll(Array(revisions[..<half]))
            let second = try await writeAll(Array(revisions[half...]))
            return Result(written: first.written + second.written, failures: first.failures + second.failures)
        }
    }

    func report(_ failure: WriteFailure) {
        logger.error("Replicator: couldn't write document `\(failure.id.rawValue)`, revision `\(failure.revision?.description ?? "")`, to target database `\(target.displayName)`. Error: `\(failure.error)`, reason: `\(failure.reason)`.")
    }
}
