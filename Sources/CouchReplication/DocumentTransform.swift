import CouchCore

/// A function that rewrites each document body on its way (as the mobile libraries'
/// `propertiesTransformationBlock` did): it gets the members not starting with `_` and returns
/// the new ones; `_id`, `_rev`, `_revisions`, `_deleted` and `_attachments` are kept as they
/// were. Applied by the writer stage, to every revision written, after it was fetched; the
/// revision ID is not recomputed. A document whose transformation throws is not written: it
/// counts in `doc_write_failures`, as a document the target refuses.
///
/// A replication names one with `"transform"`: a Swift function an application registered
/// (`ReplicationManager.registerTransform`), or `ddoc/name`, a JavaScript function of the local
/// database's design document `_design/ddoc` (its `transforms` member), run in that database's
/// worker processes with the limits of every design function.
public struct DocumentTransform: Sendable {
    public enum Direction: String, Sendable, Equatable {
        /// A local source, a remote target.
        case push
        /// A remote source, a local target.
        case pull
        /// Both ends local, or both remote.
        case between
    }

    /// One document to transform: its ID and its members not starting with `_`.
    public typealias Input = (id: DocumentID, body: JSONObject)

    let transformBatch: @Sendable (_ documents: [Input], _ direction: Direction) -> [Result<JSONObject, CouchError>]

    /// A function of one document at a time; what it throws skips that document.
    public init(_ transform: @escaping @Sendable (_ id: DocumentID, _ body: JSONObject, _ direction: Direction) throws -> JSONObject) {
        transformBatch = { documents, direction in
            documents.map { document in
                Result { () throws(CouchError) -> JSONObject in
                    do {
                        return try transform(document.id, document.body, direction)
                    } catch let error as CouchError {
                        throw error
                    } catch {
                        throw CouchError(.unknownError, String(describing: error))
                    }
                }
            }
        }
    }

    /// A function of a batch of documents (one entry into a JavaScript worker for all of them):
    /// one result per document, in order.
    public init(batch: @escaping @Sendable (_ documents: [Input], _ direction: Direction) -> [Result<JSONObject, CouchError>]) {
        transformBatch = batch
    }

    static func direction(source: ReplicationPeer, target: ReplicationPeer) -> Direction {
        switch (source, target) {
        case (.local, .remote): .push
        case (.remote, .local): .pull
        default: .between
        }
    }

    /// The revisions to write, transformed, and the failures of those whose transformation threw.
    func apply(_ revisions: [ReplicatedRevision], direction: Direction) -> (revisions: [ReplicatedRevision], failures: [WriteFailure]) {
        let documents = revisions.map(\.document)  // parsed once: a fetched revision may hold only its JSON
        let inputs = zip(revisions, documents).map { revision, document -> Input in
            var body = JSONObject()
            for (key, value) in document where !key.hasBytePrefix("_") { body[key] = value }
            return (revision.id, body)
        }
        let results = transformBatch(inputs, direction)
        var transformed: [ReplicatedRevision] = []
        var failures: [WriteFailure] = []
        for (index, revision) in revisions.enumerated() {
            let result = index < results.count ? results[index] : .failure(CouchError.internalError("no result from the transform"))
            switch result {
            case .success(let body):
                var document = JSONObject()
                for (key, value) in documents[index] where key.hasBytePrefix("_") { document[key] = value }
                for (key, value) in body where !key.hasBytePrefix("_") { document[key] = value }
                transformed.append(ReplicatedRevision(id: revision.id, revision: revision.revision, document: document))
            case .failure(let error):
                failures.append(WriteFailure(id: revision.id, revision: revision.revision, error: error.error,
                                             reason: "transform: \(error.reason)"))
            }
        }
        return (transformed, failures)
    }
}
