import CouchCore
import Foundation

/// Attachment bodies of one database, one file per content (named by the SHA-256 of the
/// stored bytes) in a directory beside the database file, shared by every revision that
/// keeps the same attachment. A blob is written to a staging file, synced, and renamed
/// into place before the revision that references it commits.
public final class AttachmentStore: @unchecked Sendable {
    public let directory: String
    let stagingDirectory: String
    private let lock = NSLock()
    /// Blobs staged for writes that have not committed yet; compaction must keep them.
    private var inFlight: [String: Int] = [:]

    init(directory: String) throws(CouchError) {
        self.directory = directory
        stagingDirectory = directory + "/staging"
        do {
            try FileManager.default.createDirectory(atPath: stagingDirectory, withIntermediateDirectories: true)
        } catch {
            throw CouchError.internalError("cannot create attachment directory")
        }
        // Staging files left by a crash belong to writes that never committed.
        for file in (try? FileManager.default.contentsOfDirectory(atPath: stagingDirectory)) ?? [] {
            unlink(stagingDirectory + "/" + file)
        }
    }

    public func path(for key: String) -> String { directory + "/" + key }

    /// A blob being written piece by piece (an upload streamed from the network).
    public func makeWriter() throws(CouchError) -> BlobWriter {
        try BlobWriter(directory: stagingDirectory)
    }

    /// Stores bytes already in memory (inline base64 data).
    public func ingest(_ bytes: [UInt8]) throws -> StagedBlob {
        let writer = try makeWriter()
        do {
            try writer.write(bytes)
            return try commit(writer)
        } catch {
            writer.abandon()
            throw error
        }
    }

    /// Moves a finished writer's file into place under its content key, and marks the
    /// blob in flight until `release`.
    public func commit(_ writer: BlobWriter) throws(CouchError) -> StagedBlob {
        let (temporary, digests) = try writer.finish()
        let key = Digest.hex(digests.sha256)
        let destination = path(for: key)
        lock.lock()
        defer { lock.unlock() }
        let isNew = !FileManager.default.fileExists(atPath: destination)
        if isNew {
            guard rename(temporary, destination) == 0 else {
                unlink(temporary)
                throw CouchError.internalError("cannot store attachment")
            }
            syncDirectory()
        } else {
            unlink(temporary)
        }
        inFlight[key, default: 0] += 1
        return StagedBlob(key: key, md5: digests.md5, length: digests.length, isNew: isNew)
    }

    /// The write that staged these blobs committed or failed.
    func release(_ blobs: [StagedBlob]) {
        lock.lock()
        defer { lock.unlock() }
        for blob in blobs {
            inFlight[blob.key, default: 1] -= 1
            if inFlight[blob.key] == 0 { inFlight[blob.key] = nil }
        }
    }

    /// Deletes these blobs unless a write holds them.
    func removeIfIdle(_ keys: [String]) {
        lock.lock()
        defer { lock.unlock() }
        for key in keys where inFlight[key] == nil { unlink(path(for: key)) }
    }

    public func read(_ key: String) throws(CouchError) -> [UInt8] {
        // An absent body has no key; never read the directory itself.
        guard !key.isEmpty else { throw CouchError(.attachmentNotDownloaded, "attachment body was not downloaded") }
        guard let data = FileManager.default.contents(atPath: path(for: key)) else {
            throw CouchError.internalError("attachment body is missing")
        }
        return [UInt8](data)
    }

    /// Deletes every blob that no revision references and no write holds; returns how many.
    func removeUnreferenced(keeping referenced: Set<String>) -> Int {
        lock.lock()
        defer { lock.unlock() }
        var removed = 0
        for file in (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        where file != "staging" && !referenced.contains(file) && inFlight[file] == nil {
            if unlink(path(for: file)) == 0 { removed += 1 }
        }
        return removed
    }

    /// Removes the whole directory (the database was deleted).
    func removeAll() {
        try? FileManager.default.removeItem(atPath: directory)
    }

    private func syncDirectory() {
        let descriptor = open(directory, O_RDONLY)
        if descriptor >= 0 {
            fsync(descriptor)
            close(descriptor)
        }
    }
}

/// A blob in the store, staged for a write: its key, CouchDB digest and size.
public struct StagedBlob: Sendable, Equatable {
    public let key: String
    public let md5: [UInt8]
    public let length: Int
    /// Whether this write created the file (rather than finding the same content stored).
    public let isNew: Bool
    public var digest: String { AttachmentInfo.digestString(md5: md5) }
}

/// Writes one blob to a staging file while computing its digests.
public final class BlobWriter {
    /// The staging file being written (removed or moved into place when done).
    public let path: String
    private var descriptor: Int32
    private let md5 = StreamingDigest(.md5)
    private let sha256 = StreamingDigest(.sha256)
    public private(set) var length = 0

    init(directory: String) throws(CouchError) {
        path = directory + "/" + Digest.randomHex(bytes: 12)
        descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL, 0o600)
        guard descriptor >= 0 else { throw CouchError.internalError("cannot create staging file") }
    }

    deinit { abandon() }

    public func write(_ bytes: UnsafeRawBufferPointer) throws(CouchError) {
        md5.update(bytes)
        sha256.update(bytes)
        length += bytes.count
        var offset = 0
        while offset < bytes.count {
            let written = Glibc.write(descriptor, bytes.baseAddress! + offset, bytes.count - offset)
            if written < 0 {
                if errno == EINTR { continue }
                throw CouchError.writeFailed(errno: errno, "cannot write attachment")
            }
            offset += written
        }
    }

    public func write(_ bytes: [UInt8]) throws {
        try bytes.withUnsafeBytes { try write($0) }
    }

    func finish() throws(CouchError) -> (path: String, digests: (md5: [UInt8], sha256: [UInt8], length: Int)) {
        guard descriptor >= 0 else { throw CouchError.internalError("attachment writer already closed") }
        let synced = fsync(descriptor) == 0
        let failure = errno
        close(descriptor)
        descriptor = -1
        guard synced else {
            unlink(path)
            throw CouchError.writeFailed(errno: failure, "cannot sync attachment")
        }
        return (path, (md5.finish(), sha256.finish(), length))
    }

    /// Drops an unfinished blob.
    public func abandon() {
        guard descriptor >= 0 else { return }
        close(descriptor)
        descriptor = -1
        unlink(path)
    }
}
