import CouchCore
import CouchStore
import Foundation

/// A revision on the attachment road: its JSON, whose `_attachments` marks each attachment
/// the target lacks `"follows": true` (with `length`, and `encoding`/`encoded_length` when
/// it travels compressed) and leaves the others as stubs, and the bodies of the ones that
/// follow, in the order the JSON names them.
public struct AttachedRevision: Sendable {
    public let revision: ReplicatedRevision
    public let bodies: [AttachmentBody]
    /// An attachment the target lacks whose body the source never downloaded (attachments
    /// on demand): the revision cannot be sent, and counts as a write failure.
    public var absentBody: String?

    public init(revision: ReplicatedRevision, bodies: [AttachmentBody], absentBody: String? = nil) {
        self.revision = revision
        self.bodies = bodies
        self.absentBody = absentBody
    }

    /// The number of attachment bytes it carries.
    public var bodyLength: Int { bodies.reduce(0) { $0 + $1.length } }
}

/// The bytes of one attachment as stored and sent: compressed when `encoding` says so
/// (`gzip`), never decoded on the way, so the target stores what the source stored.
public struct AttachmentBody: Sendable {
    public let name: String
    public let contentType: String
    /// `gzip` when the bytes are compressed; nil for identity.
    public let encoding: String?
    /// The number of bytes in `content` (the encoded length when compressed).
    public let length: Int
    public let content: Content

    public init(name: String, contentType: String, encoding: String?, length: Int, content: Content) {
        self.name = name
        self.contentType = contentType
        self.encoding = encoding
        self.length = length
        self.content = content
    }

    /// Where the bytes are.
    public enum Content: Sendable {
        /// In memory (small bodies received for a remote target).
        case bytes([UInt8])
        /// A file owned by someone else: a local source's blob, read as it is sent.
        case file(path: String)
        /// A temporary file of a `TemporaryFileSpool`, removed when the last copy goes.
        case spooled(SpoolFile)
        /// Written into a local target's blob store, to be committed by the write.
        case blob(SpooledBlob)
    }
}

/// A temporary file holding one attachment body; deleted when this object goes away.
public final class SpoolFile: Sendable {
    public let path: String

    init(path: String) { self.path = path }

    deinit { unlink(path) }
}

/// An attachment body written into a database's blob store while it was received, and not
/// committed yet: the write that uses it commits it (`AttachmentStore.commit`), and one
/// that never comes leaves nothing behind (the staging file is removed with this object).
public final class SpooledBlob: @unchecked Sendable {
    let store: AttachmentStore
    private let writer: BlobWriter

    init(store: AttachmentStore, writer: BlobWriter) {
        self.store = store
        self.writer = writer
    }

    /// The staging file (readable until the blob is committed).
    var path: String { writer.path }

    /// Moves the bytes into place in the store (blocking: it syncs the file); the write
    /// that passes the result to `bulkUpdate` hands it over there.
    func commit(compressing: Bool) throws(CouchError) -> StagedBlob {
        try store.commit(writer, compressing: compressing)
    }
}
