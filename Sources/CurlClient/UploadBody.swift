import Foundation

/// A request body read while it is sent, from bytes in memory and ranges of files, so a
/// large upload never sits in memory whole. Its length is known up front (it goes out
/// with `Content-Length`), and it can be read again from the start (a retried request).
public struct UploadBody: Sendable {
    public enum Piece: Sendable {
        case bytes([UInt8])
        /// `length` bytes of the file at `path`, from `offset`.
        case file(path: String, offset: Int, length: Int)

        var length: Int {
            switch self {
            case .bytes(let bytes): bytes.count
            case .file(_, _, let length): length
            }
        }
    }

    public private(set) var pieces: [Piece] = []
    public private(set) var length = 0

    public init() {}

    public mutating func append(_ bytes: [UInt8]) {
        guard !bytes.isEmpty else { return }
        if case .bytes(let last)? = pieces.last {
            pieces[pieces.count - 1] = .bytes(last + bytes)
        } else {
            pieces.append(.bytes(bytes))
        }
        length += bytes.count
    }

    public mutating func append(_ text: String) { append(Array(text.utf8)) }

    public mutating func appendFile(path: String, offset: Int = 0, length: Int) {
        guard length > 0 else { return }
        pieces.append(.file(path: path, offset: offset, length: length))
        self.length += length
    }
}

/// Reads an `UploadBody` front to back for libcurl's read callback (transfer loop thread).
final class UploadBodyReader {
    private let body: UploadBody
    private var index = 0
    /// Bytes of the current piece already read.
    private var offset = 0
    private var descriptor: Int32 = -1

    init(_ body: UploadBody) { self.body = body }

    deinit { closeFile() }

    var length: Int { body.length }

    /// Fills `buffer`; returns the bytes written, 0 at the end, nil if a file could not be
    /// read to its stated length (the transfer is then aborted).
    func read(into buffer: UnsafeMutableRawBufferPointer) -> Int? {
        var filled = 0
        while filled < buffer.count && index < body.pieces.count {
            let piece = body.pieces[index]
            let wanted = min(buffer.count - filled, piece.length - offset)
            switch piece {
            case .bytes(let bytes):
                bytes.withUnsafeBytes { source in
                    (buffer.baseAddress! + filled).copyMemory(from: source.baseAddress! + offset, byteCount: wanted)
                }
                offset += wanted
                filled += wanted
            case .file(let path, let start, _):
                if descriptor < 0 {
                    descriptor = open(path, O_RDONLY | O_CLOEXEC)
                    if descriptor < 0 { return nil }
                }
                let count = pread(descriptor, buffer.baseAddress! + filled, wanted, off_t(start + offset))
                if count < 0 && errno == EINTR { continue }
                if count <= 0 { return nil }
                offset += count
                filled += count
            }
            if offset == piece.length {
                closeFile()
                index += 1
                offset = 0
            }
        }
        return filled
    }

    /// Back to the start (libcurl rewinds to send the body again).
    func rewind() {
        closeFile()
        index = 0
        offset = 0
    }

    private func closeFile() {
        if descriptor >= 0 {
            close(descriptor)
            descriptor = -1
        }
    }
}
