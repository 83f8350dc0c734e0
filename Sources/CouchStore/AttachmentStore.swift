import CouchCore
import Foundation

/// Attachment bodies of one database, one file per content (named by the SHA-256 of the
/// stored bytes) in a directory beside the database file, shared by every revision that
/// keeps the same attachment. A blob is written to a staging file, synced, and renamed
/// into place before the revision that references it commits.
///
/// A blob a write puts in place is marked first (an empty file of its name in `pending/`,
/// synced before the rename) and unmarked once its write committed, or failed and cleaned
/// up. Marks left by a crash name the only blobs that may belong to no revision: `sweep`
/// checks those when the database is opened, so orphans do not pile up across crashes
/// without a compaction, at the cost of a directory listing for a clean start.
public final class AttachmentStore: @unchecked Sendable {
    public let directory: String
    let stagingDirectory: String
    let pendingDirectory: String
    private let lock = NSLock()
    /// Blobs staged for writes that have not committed yet; compaction must keep them.
    private var inFlight: [String: Int] = [:]
    /// Blobs a failed write's cleanup is deciding about, and whether a write staged one
    /// meanwhile (that write may have committed a reference: the blob must stay).
    private var watched: [String: (watchers: Int, restaged: Bool)] = [:]
    private var compressionSetting = AttachmentCompression()

    /// `[attachments] compressible_types` and `compression_level`: which unencoded
    /// attachments are stored gzip-compressed (set by the `DatabaseManager`).
    public var compression: AttachmentCompression {
        get { lock.withLock { compressionSetting } }
        set { lock.withLock { compressionSetting = newValue } }
    }

    init(directory: String) throws(CouchError) {
        self.directory = directory
        stagingDirectory = directory + "/staging"
        pendingDirectory = directory + "/pending"
        do {
            try FileManager.default.createDirectory(atPath: stagingDirectory, withIntermediateDirectories: true)
            try FileManager.default.createDirectory(atPath: pendingDirectory, withIntermediateDirectories: true)
        } catch {
            throw CouchError.internalError("cannot create attachment directory")
        }
        // Staging files left by a crash belong to writes that never committed.
        for file in (try? FileManager.default.contentsOfDirectory(atPath: stagingDirectory)) ?? [] {
            unlink(stagingDirectory + "/" + file)
        }
    }

    /// Names in the blob directory that are not blobs.
    static let reservedNames: Set<String> = ["staging", "pending"]

    /// Whether a name is a blob key (64 lower-case hex digits).
    static func isKey(_ name: String) -> Bool {
        name.utf8.count == 64 && name.utf8.allSatisfy { (48...57).contains($0) || (97...102).contains($0) }
    }

    /// Deletes the blobs a crash left marked that no revision refers to (`referenced` says
    /// which of the given keys a revision refers to), and the marks. Runs when the database
    /// opens, before any write (no other process has it open: the data directory is this
    /// process's, see `DataDirectoryLock`). Returns how many blobs were deleted.
    @discardableResult
    func sweep(referenced: ([String]) throws -> Set<String>) -> Int {
        let marks = (try? FileManager.default.contentsOfDirectory(atPath: pendingDirectory)) ?? []
        guard !marks.isEmpty else { return 0 }
        let keys = marks.filter(Self.isKey)
        // Data safety first: when the references cannot be read, nothing is deleted.
        guard let kept = try? referenced(keys) else { return 0 }
        var removed = 0
        for key in keys where !kept.contains(key) {
            if unlink(path(for: key)) == 0 { removed += 1 }
        }
        if removed > 0 { syncDirectory() }
        for mark in marks { unlink(pendingDirectory + "/" + mark) }
        _ = syncPendingDirectory()
        return removed
    }

    /// Makes the entries of `pending/` durable; errno, or 0. Opened for the moment only: an
    /// open database holds no descriptor of its own.
    private func syncPendingDirectory() -> Int32 {
        let descriptor = open(pendingDirectory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard descriptor >= 0 else { return errno }
        defer { close(descriptor) }
        return fsync(descriptor) == 0 ? 0 : errno
    }

    public func path(for key: String) -> String { directory + "/" + key }

    /// A blob being written piece by piece (an upload streamed from the network);
    /// `compressing`: stored gzip-compressed (see `compression`).
    public func makeWriter(compressing: Bool = false) throws(CouchError) -> BlobWriter {
        let compression = self.compression
        return try BlobWriter(directory: stagingDirectory,
                              compressionLevel: compressing && compression.isEnabled ? compression.level : nil)
    }

    /// Whether an attachment of this type and encoding is stored compressed.
    public func compresses(contentType: String?, encoding: String?) -> Bool {
        compression.compresses(contentType: contentType, encoding: encoding)
    }

    /// Stores bytes already in memory (inline base64 data), compressed when `compressing`.
    public func ingest(_ bytes: [UInt8], compressing: Bool = false) throws -> StagedBlob {
        let writer = try makeWriter(compressing: compressing)
        do {
            try writer.write(bytes)
            return try commit(writer)
        } catch {
            writer.abandon()
            throw error
        }
    }

    /// Stores a copy of a file's bytes (read a megabyte at a time), compressed when `compressing`.
    public func ingest(contentsOf path: String, compressing: Bool = false) throws(CouchError) -> StagedBlob {
        try commit(try copy(path, compressing: compressing))
    }

    /// Moves a finished writer's file into place; when `compressing` and the writer did not
    /// compress, its bytes are stored compressed instead (the bodies of a multipart upload,
    /// received before the document says what they are).
    public func commit(_ writer: BlobWriter, compressing: Bool) throws(CouchError) -> StagedBlob {
        guard compressing, !writer.isCompressing, compression.isEnabled else { return try commit(writer) }
        let received = try writer.closeUnsynced()
        defer { unlink(received) }
        return try commit(try copy(received, compressing: true))
    }

    private func copy(_ path: String, compressing: Bool) throws(CouchError) -> BlobWriter {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw CouchError.internalError("attachment body \(path) cannot be read") }
        defer { Glibc.close(descriptor) }
        let writer = try makeWriter(compressing: compressing)
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 1)
        defer { buffer.deallocate() }
        while true {
            let count = Glibc.read(descriptor, buffer.baseAddress!, buffer.count)
            if count < 0 && errno == EINTR { continue }
            guard count >= 0 else {
                writer.abandon()
                throw CouchError.internalError("attachment body \(path) cannot be read")
            }
            if count == 0 { return writer }
            do {
                try writer.write(UnsafeRawBufferPointer(rebasing: buffer[..<count]))
            } catch {
                writer.abandon()
                throw error
            }
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
            // Marked (durably) before it is in place: a crash before its write commits
            // leaves the mark for `sweep`.
            let mark = open(pendingDirectory + "/" + key, O_WRONLY | O_CREAT | O_CLOEXEC, 0o600)
            guard mark >= 0 else {
                let failure = errno
                unlink(temporary)
                throw CouchError.writeFailed(errno: failure, "cannot store attachment")
            }
            close(mark)
            let failure = syncPendingDirectory()
            guard failure == 0 else {
                unlink(temporary)
                unlink(pendingDirectory + "/" + key)
                throw CouchError.writeFailed(errno: failure, "cannot store attachment")
            }
            guard rename(temporary, destination) == 0 else {
                unlink(temporary)
                unlink(pendingDirectory + "/" + key)
                throw CouchError.internalError("cannot store attachment")
            }
            syncDirectory()
        } else {
            unlink(temporary)
        }
        inFlight[key, default: 0] += 1
        watched[key]?.restaged = true
        return StagedBlob(key: key, md5: digests.md5, length: digests.length, isNew: isNew, given: digests.given)
    }

    /// The write that staged these blobs committed (`committed`: a revision refers to each,
    /// so the last holder unmarks it) or failed (the caller then cleans up with
    /// `idleStagings` and `removeIfUnchanged`, which unmark).
    func release(_ blobs: [StagedBlob], committed: Bool) {
        lock.lock()
        defer { lock.unlock() }
        for blob in blobs {
            inFlight[blob.key, default: 1] -= 1
            if inFlight[blob.key] == 0 {
                inFlight[blob.key] = nil
                if committed { unlink(pendingDirectory + "/" + blob.key) }
            }
        }
    }

    /// Of these blobs, those no write holds, watched from now on (until
    /// `removeIfUnchanged`) for a write staging them again.
    func watchIdle(_ keys: [String]) -> [String] {
        lock.lock()
        defer { lock.unlock() }
        var idle: [String] = []
        for key in Set(keys) where inFlight[key] == nil {
            watched[key, default: (0, false)].watchers += 1
            idle.append(key)
        }
        return idle
    }

    /// Ends the watch of `watchIdle`: deletes the blobs of `unreferenced` and unmarks the
    /// watched ones, unless a write staged one meanwhile (that write unmarks it itself).
    func removeIfUnchanged(_ idle: [String], unreferenced: Set<String>) {
        lock.lock()
        defer { lock.unlock() }
        for key in idle {
            guard var watch = watched[key] else { continue }
            if inFlight[key] == nil && !watch.restaged {
                if unreferenced.contains(key) { unlink(path(for: key)) }
                unlink(pendingDirectory + "/" + key)
            }
            watch.watchers -= 1
            watched[key] = watch.watchers > 0 ? watch : nil
        }
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
        where !Self.reservedNames.contains(file) && !referenced.contains(file) && inFlight[file] == nil {
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

/// A blob in the store, staged for a write: its key, CouchDB digest and size (of the bytes
/// stored).
public struct StagedBlob: Sendable, Equatable {
    public let key: String
    public let md5: [UInt8]
    public let length: Int
    /// Whether this write created the file (rather than finding the same content stored).
    public let isNew: Bool
    /// The bytes as given, when the store compressed them (nil: stored as given).
    public let given: GivenBytes?
    public var digest: String { AttachmentInfo.digestString(md5: md5) }
    /// `gzip` when the store compressed the bytes.
    public var encoding: String? { given == nil ? nil : "gzip" }

    /// The bytes a sender gave before the store compressed them: what its `length` and `digest` describe.
    public struct GivenBytes: Sendable, Equatable {
        public let md5: [UInt8]
        public let length: Int
        public var digest: String { AttachmentInfo.digestString(md5: md5) }
    }
}

/// Writes one blob to a staging file while computing its digests; with a compression level,
/// the file receives the bytes gzip-compressed (`GzipCompressor`) and the digests are of
/// what it receives, those of the bytes given kept beside.
public final class BlobWriter {
    typealias Finished = (path: String, digests: (md5: [UInt8], sha256: [UInt8], length: Int, given: StagedBlob.GivenBytes?))

    /// The staging file being written (removed or moved into place when done).
    public let path: String
    private var descriptor: Int32
    private let md5 = StreamingDigest(.md5)
    private let sha256 = StreamingDigest(.sha256)
    /// Bytes written to the file.
    public private(set) var length = 0
    private let compressor: GzipCompressor?
    private let givenMD5: StreamingDigest?
    private var givenLength = 0
    /// Synced and closed by `close`, not yet handed to the store.
    private var closed: Finished?
    /// The store took the staging file (it moved or removed it).
    private var handedOver = false

    init(directory: String, compressionLevel: Int? = nil) throws(CouchError) {
        path = directory + "/" + Digest.randomHex(bytes: 12)
        compressor = compressionLevel.map(GzipCompressor.init(level:))
        givenMD5 = compressionLevel == nil ? nil : StreamingDigest(.md5)
        descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL, 0o600)
        guard descriptor >= 0 else { throw CouchError.internalError("cannot create staging file") }
    }

    deinit { abandon() }

    public var isCompressing: Bool { compressor != nil }

    public func write(_ bytes: UnsafeRawBufferPointer) throws(CouchError) {
        guard let compressor, let givenMD5 else { return try store(bytes) }
        givenMD5.update(bytes)
        givenLength += bytes.count
        try compress(bytes, compressor, finish: false)
    }

    private func compress(_ bytes: UnsafeRawBufferPointer, _ compressor: GzipCompressor, finish: Bool) throws(CouchError) {
        do {
            try compressor.compress(bytes, finish: finish) { output throws(CouchError) in try store(output) }
        } catch let error as CouchError {
            throw error
        } catch {
            throw CouchError.internalError("cannot compress attachment")
        }
    }

    private func store(_ bytes: UnsafeRawBufferPointer) throws(CouchError) {
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

    /// Syncs and closes the staging file now, freeing its descriptor; the store moves it into
    /// place later (`AttachmentStore.commit`). A request with many parts holds files, not
    /// descriptors.
    public func close() throws(CouchError) {
        closed = try syncAndClose()
    }

    func finish() throws(CouchError) -> Finished {
        let finished: Finished
        if let closed { finished = closed } else { finished = try syncAndClose() }
        handedOver = true
        return finished
    }

    private func syncAndClose() throws(CouchError) -> Finished {
        guard descriptor >= 0 else { throw CouchError.internalError("attachment writer already closed") }
        if let compressor {
            do {
                try compress(UnsafeRawBufferPointer(start: nil, count: 0), compressor, finish: true)
            } catch {
                abandon()
                throw error
            }
        }
        let synced = fsync(descriptor) == 0
        let failure = errno
        Glibc.close(descriptor)
        descriptor = -1
        guard synced else {
            unlink(path)
            throw CouchError.writeFailed(errno: failure, "cannot sync attachment")
        }
        let given = givenMD5.map { StagedBlob.GivenBytes(md5: $0.finish(), length: givenLength) }
        return (path, (md5.finish(), sha256.finish(), length, given))
    }

    /// The file, closed unsynced (or as `close` left it), for its bytes to be read once more and
    /// stored otherwise; the caller removes it.
    func closeUnsynced() throws(CouchError) -> String {
        guard descriptor >= 0 else {
            guard closed != nil, !handedOver else { throw CouchError.internalError("attachment writer already closed") }
            handedOver = true
            return path
        }
        Glibc.close(descriptor)
        descriptor = -1
        handedOver = true
        return path
    }

    /// Drops a blob the store has not taken.
    public func abandon() {
        guard !handedOver else { return }
        if descriptor >= 0 {
            Glibc.close(descriptor)
            descriptor = -1
        } else if closed == nil {
            return  // never opened, or its sync failed and removed it
        }
        handedOver = true
        unlink(path)
    }
}
