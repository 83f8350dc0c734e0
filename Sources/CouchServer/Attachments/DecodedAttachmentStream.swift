import CouchCore
import Foundation

/// An attachment stored gzip-compressed, sent decoded (to a client that does not accept
/// gzip) a buffer at a time, never decompressed whole in memory; with its decoded length
/// when known, as CouchDB sends it.
final class DecodedAttachmentStream: ResponseStream, @unchecked Sendable {
    private let path: String
    let contentLength: Int?
    private var descriptor: Int32 = -1
    private let decompressor = GzipDecompressor()
    // Small: gzip inflates text a thousandfold at most, so a step holds a few megabytes at worst.
    private var input = [UInt8](repeating: 0, count: 4 * 1024)
    private var output = StreamOutput()

    init(path: String, decodedLength: Int?) {
        self.path = path
        contentLength = decodedLength
    }

    deinit { close() }

    func start(wake: @escaping @Sendable () -> Void) {}

    func read(into buffer: UnsafeMutableRawBufferPointer) -> StreamChunk {
        while output.isDrained {
            output.reset()
            guard !decompressor.isFinished else { return .end }
            if descriptor < 0 { descriptor = open(path, O_RDONLY | O_CLOEXEC) }
            guard descriptor >= 0 else { return .end }
            let count = input.withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress!, $0.count) }
            if count < 0 && errno == EINTR { continue }
            // A body cut short or corrupt ends the response early: the client sees fewer bytes than announced.
            guard count > 0 else { return .end }
            do {
                try input.withUnsafeBytes { bytes in
                    try decompressor.decompress(UnsafeRawBufferPointer(rebasing: bytes[..<count])) {
                        output.bytes.append(contentsOf: $0)
                    }
                }
            } catch {
                return .end
            }
        }
        return .data(output.copy(into: buffer))
    }

    func close() {
        if descriptor >= 0 { Glibc.close(descriptor) }
        descriptor = -1
    }
}
