import CouchCore
import CouchStore
import Foundation

/// Where a target keeps the attachment bodies fetched for it until they are written,
/// received piece by piece as they arrive from the source so that none sits in memory
/// whole: a local target's own blob store (the write then only commits them), or
/// temporary files for a remote target (sent from there).
public protocol AttachmentSpool: Sendable {
    /// A writer for one attachment body.
    func makeWriter() throws(ReplicationError) -> any AttachmentSpoolWriter
}

/// One attachment body being received. Dropping an unfinished writer discards its bytes.
public protocol AttachmentSpoolWriter: AnyObject {
    func write(_ bytes: UnsafeRawBufferPointer) throws(ReplicationError)
    /// The number of bytes written so far.
    var length: Int { get }
    /// The body, complete.
    func finish() throws(ReplicationError) -> AttachmentBody.Content
}

/// Spools into a local database's blob store: a `BlobWriter` per body (digests computed on
/// the way), committed by the write that uses it.
struct BlobStoreSpool: AttachmentSpool {
    let store: AttachmentStore

    func makeWriter() throws(ReplicationError) -> any AttachmentSpoolWriter {
        do {
            return Writer(store: store, writer: try store.makeWriter())
        } catch {
            throw ReplicationError(.unknown, "cannot stage an attachment: \(error.reason)")
        }
    }

    final class Writer: AttachmentSpoolWriter {
        let store: AttachmentStore
        let writer: BlobWriter

        init(store: AttachmentStore, writer: BlobWriter) {
            self.store = store
            self.writer = writer
        }

        var length: Int { writer.length }

        func write(_ bytes: UnsafeRawBufferPointer) throws(ReplicationError) {
            do {
                try writer.write(bytes)
            } catch {
                throw ReplicationError(.unknown, "cannot stage an attachment: \(error.reason)")
            }
        }

        func finish() throws(ReplicationError) -> AttachmentBody.Content {
            .blob(SpooledBlob(store: store, writer: writer))
        }
    }
}

/// Spools for a remote target: small bodies in memory, larger ones in temporary files
/// (in the system's temporary directory, removed once sent).
struct TemporaryFileSpool: AttachmentSpool {
    /// Bodies up to this size stay in memory.
    static let memoryLimit = 256 * 1024
    static let directory: String = {
        let path = NSTemporaryDirectory() + "couchette-replication-spool"
        try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }()

    func makeWriter() throws(ReplicationError) -> any AttachmentSpoolWriter { Writer() }

    final class Writer: AttachmentSpoolWriter {
        private var buffer: [UInt8] = []
        private var file: SpoolFile?
        private var descriptor: Int32 = -1
        private(set) var length = 0

        deinit { if descriptor >= 0 { close(descriptor) } }

        func write(_ bytes: UnsafeRawBufferPointer) throws(ReplicationError) {
            length += bytes.count
            if file == nil && buffer.count + bytes.count <= TemporaryFileSpool.memoryLimit {
                buffer.append(contentsOf: bytes)
                return
            }
            if file == nil {
                let path = TemporaryFileSpool.directory + "/" + Digest.randomHex(bytes: 12)
                descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
                guard descriptor >= 0 else { throw ReplicationError(.unknown, "cannot create a spool file") }
                file = SpoolFile(path: path)
                let pending = buffer
                buffer = []
                try writeToFile(pending)
            }
            try writeToFile(bytes)
        }

        private func writeToFile(_ bytes: [UInt8]) throws(ReplicationError) {
            let failed = bytes.withUnsafeBytes { (bytes) -> Bool in
                do { try writeToFile(bytes) } catch { return true }
                return false
            }
            if failed { throw ReplicationError(.unknown, "cannot write a spool file") }
        }

        private func writeToFile(_ bytes: UnsafeRawBufferPointer) throws(ReplicationError) {
            var offset = 0
            while offset < bytes.count {
                let written = Glibc.write(descriptor, bytes.baseAddress! + offset, bytes.count - offset)
                if written < 0 {
                    if errno == EINTR { continue }
                    throw ReplicationError(.unknown, "cannot write a spool file")
                }
                offset += written
            }
        }

        func finish() throws(ReplicationError) -> AttachmentBody.Content {
            guard let file else { return .bytes(buffer) }
            close(descriptor)
            descriptor = -1
            return .spooled(file)
        }
    }
}
