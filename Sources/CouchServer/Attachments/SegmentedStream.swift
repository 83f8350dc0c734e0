import Foundation

/// A response body made of byte runs and file ranges (multipart documents with large
/// attachments), read a buffer at a time so attachments never sit in memory whole.
final class SegmentedStream: ResponseStream, @unchecked Sendable {
    enum Segment {
        case bytes([UInt8])
        case file(path: String, offset: Int, length: Int)
    }

    private var segments: [Segment]
    private var index = 0
    private var position = 0
    private var descriptor: Int32 = -1

    /// Every segment's length is known: the body goes with a `Content-Length`, as CouchDB
    /// sends a document's `multipart/related` body.
    let contentLength: Int?

    init(_ segments: [Segment]) {
        self.segments = segments
        contentLength = segments.reduce(0) { total, segment in
            switch segment {
            case .bytes(let bytes): total + bytes.count
            case .file(_, _, let length): total + length
            }
        }
    }

    deinit { closeFile() }

    func start(wake: @escaping @Sendable () -> Void) {}

    func read(into buffer: UnsafeMutableRawBufferPointer) -> StreamChunk {
        while index < segments.count {
            switch segments[index] {
            case .bytes(let bytes):
                let count = min(buffer.count, bytes.count - position)
                if count > 0 {
                    bytes.withUnsafeBytes { source in
                        buffer.baseAddress!.copyMemory(from: source.baseAddress! + position, byteCount: count)
                    }
                    position += count
                    return .data(count)
                }
            case .file(let path, let offset, let length):
                if descriptor < 0 { descriptor = open(path, O_RDONLY) }
                guard descriptor >= 0 else { return .end }
                let wanted = min(buffer.count, length - position)
                if wanted > 0 {
                    let count = pread(descriptor, buffer.baseAddress!, wanted, off_t(offset + position))
                    guard count > 0 else { return .end }
                    position += count
                    return .data(count)
                }
                closeFile()
            }
            index += 1
            position = 0
        }
        return .end
    }

    func close() { closeFile() }

    private func closeFile() {
        if descriptor >= 0 { Glibc.close(descriptor) }
        descriptor = -1
    }
}
