import CouchCore

/// A Swift function an embedding application gives a replication to rewrite each document
/// body on its way (as the mobile libraries' `propertiesTransformationBlock` did): it gets
/// the members not starting with `_` and returns the new ones; `_id`, `_rev`, `_revisions`,
/// `_deleted` and `_attachments` are kept as they were. Applied by the writer stage, to
/// every revision written, after it was fetched. The revision ID is not recomputed.
public struct DocumentTransform: Sendable {
    public enum Direction: Sendable, Equatable {
        /// A local source, a remote target.
        case push
        /// A remote source, a local target.
        case pull
        /// Both ends local, or both remote.
        case between
    }

    public let transform: @Sendable (_ id: DocumentID, _ body: JSONObject, _ direction: Direction) -> JSONObject

    public init(_ transform: @escaping @Sendable (_ id: DocumentID, _ body: JSONObject, _ direction: Direction) -> JSONObject) {
        self.transform = transform
    }

    static func direction(source: ReplicationPeer, target: ReplicationPeer) -> Direction {
        switch (source, target) {
        case (.local, .remote): .push
        case (.remote, .local): .pull
        default: .between
        }
    }

    func apply(_ revision: ReplicatedRevision, direction: Direction) -> ReplicatedRevision {
        var body = JSONObject()
        for (key, value) in revision.document where !key.hasPrefix("_") { body[key] = value }
        let transformed = transform(revision.id, body, direction)
        var document = JSONObject()
        for (key, value) in revision.document where key.hasPrefix("_") { document[key] = value }
        for (key, value) in transformed where !key.hasPrefix("_") { document[key] = value }
        return ReplicatedRevision(id: revision.id, revision: revision.revision, document: document)
    }
}
