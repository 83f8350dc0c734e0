import CouchCore
import CouchStore
import Foundation
import Logging

/// Attachments on demand, the fetching half: a pull with `"attachments": "on_demand"`
/// stored its attachments' metadata with the bodies absent; when a reader first needs
/// such a body, it is fetched from the job's source (`GET /db/doc/att?rev=...`, with the
/// job's URL, headers, credentials and TLS settings), checked against its digest by the
/// store, and stored for good. The store knows only "body absent" and how to fill it.
public final class OnDemandAttachments: Sendable {
    private let replicatorDatabase: ReplicatorDatabase
    private let logger = Logger(label: "couchette.replicator")
    /// One retry: a reader is waiting.
    static let retries = 1

    public init(replicatorDatabase: ReplicatorDatabase) {
        self.replicatorDatabase = replicatorDatabase
    }

    /// The attachment of `revision` with its body stored, fetched first if it was absent.
    /// Blocks the calling thread (a request's) until the body is stored or the fetch failed
    /// (`attachment_not_downloaded`, with what went wrong).
    public func materialize(_ database: Database, id: DocumentID, revision: RevisionID,
                            attachment: AttachmentInfo) throws -> AttachmentInfo {
        guard attachment.isBodyAbsent else { return attachment }
        let sources = replicatorDatabase.onDemandSources(for: database.name)
        guard !sources.isEmpty else { throw attachment.absentBodyError(documentID: id.rawValue) }
        let client = replicatorDatabase.scheduler.manager.client
        let logger = self.logger
        let outcome = Locked<Result<AttachmentInfo, CouchError>?>(nil)
        let done = DispatchSemaphore(value: 0)
        Task {
            var failures: [String] = []
            for peer in sources {
                let endpoint = RemoteEndpoint(peer: peer, client: client, retries: Self.retries, logger: logger)
                do {
                    let stored = try await Self.fetch(endpoint, into: database, id: id, revision: revision, attachment: attachment)
                    outcome.set(.success(stored))
                    break
                } catch {
                    failures.append("\(peer.displayURL): \((error as? ReplicationError)?.reason ?? (error as? CouchError)?.reason ?? String(describing: error))")
                }
            }
            if outcome.value == nil {
                outcome.set(.failure(attachment.absentBodyError(documentID: id.rawValue, detail: failures.joined(separator: "; "))))
            }
            done.signal()
        }
        done.wait()
        return try outcome.value!.get()
    }

    private static func fetch(_ endpoint: RemoteEndpoint, into database: Database, id: DocumentID, revision: RevisionID,
                              attachment: AttachmentInfo) async throws -> AttachmentInfo {
        var writer = try database.attachments.makeWriter()
        do {
            try await endpoint.attachmentBody(id, revision: revision, name: attachment.name, encoding: attachment.encoding) {
                try writer.write($0)
            }
        } catch where error.kind == .notFound {
            // A revision written here since (a stub kept by a local edit) is unknown to the
            // source: its current revision may still hold the same bytes (the digest decides).
            writer.abandon()
            writer = try database.attachments.makeWriter()
            do {
                try await endpoint.attachmentBody(id, revision: nil, name: attachment.name, encoding: attachment.encoding) {
                    try writer.write($0)
                }
            } catch {
                writer.abandon()
                throw error
            }
        } catch {
            writer.abandon()
            throw error
        }
        // Committing syncs the file and the fill writes to SQLite: off the task threads.
        let handed = Locked(writer)
        return try await Blocking.run { try database.fillAbsentBody(id, revision: revision, name: attachment.name, with: handed.value) }
    }
}

/// A value shared between a task and the thread waiting for it.
private final class Locked<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: Value
    init(_ value: Value) { stored = value }
    var value: Value { lock.withLock { stored } }
    func set(_ value: Value) { lock.withLock { stored = value } }
}
