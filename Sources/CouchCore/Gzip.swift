import CZlib

/// gzip for attachments stored compressed (as CouchDB stores compressible types and
/// as peers send them with `"encoding": "gzip"`).
public enum Gzip {
    /// The decompressed bytes, or nil when the input is not valid gzip.
    public static func decompress(_ input: [UInt8], maximumSize: Int = 1 << 32) -> [UInt8]? {
        var stream = z_stream()
        guard inflateInit2_(&stream, 16 + MAX_WBITS, ZLIB_VERSION, Int32(MemoryLayout<z_stream>.size)) == Z_OK else {
            return nil
        }
        defer { inflateEnd(&stream) }
        var output: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        var status = Z_OK
        input.withUnsafeBufferPointer { source in
            stream.next_in = UnsafeMutablePointer(mutating: source.baseAddress)
            stream.avail_in = UInt32(source.count)
            repeat {
                chunk.withUnsafeMutableBufferPointer { buffer in
                    stream.next_out = buffer.baseAddress
                    stream.avail_out = UInt32(buffer.count)
                    status = inflate(&stream, Z_NO_FLUSH)
                    output.append(contentsOf: buffer.prefix(buffer.count - Int(stream.avail_out)))
                }
            } while status == Z_OK && output.count <= maximumSize && (stream.avail_in > 0 || stream.avail_out == 0)
        }
        return status == Z_STREAM_END ? output : nil
    }

    /// Whether `input` is one complete gzip stream that decompresses to at most `maximumSize`
    /// bytes; decompresses through a fixed buffer, so checking costs no memory.
    public static func isValid(_ input: [UInt8], maximumSize: Int = 1 << 32) -> Bool {
        var stream = z_stream()
        guard inflateInit2_(&stream, 16 + MAX_WBITS, ZLIB_VERSION, Int32(MemoryLayout<z_stream>.size)) == Z_OK else {
            return false
        }
        defer { inflateEnd(&stream) }
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        var status = Z_OK
        var produced = 0
        input.withUnsafeBufferPointer { source in
            stream.next_in = UnsafeMutablePointer(mutating: source.baseAddress)
            stream.avail_in = UInt32(clamping: source.count)
            repeat {
                chunk.withUnsafeMutableBufferPointer { buffer in
                    stream.next_out = buffer.baseAddress
                    stream.avail_out = UInt32(buffer.count)
                    status = inflate(&stream, Z_NO_FLUSH)
                    produced += buffer.count - Int(stream.avail_out)
                }
            } while status == Z_OK && produced <= maximumSize && (stream.avail_in > 0 || stream.avail_out == 0)
        }
        return status == Z_STREAM_END && stream.avail_in == 0 && produced <= maximumSize
    }

    /// `input` as one gzip stream, as CouchDB's attachment store writes it (see `GzipCompressor`).
    public static func compress(_ input: [UInt8], level: Int = AttachmentCompression.defaultLevel) -> [UInt8] {
        let compressor = GzipCompressor(level: level)
        var output: [UInt8] = []
        input.withUnsafeBytes { bytes in
            compressor.compress(bytes, finish: true) { output.append(contentsOf: $0) }
        }
        return output
    }
}

/// A gzip stream written piece by piece, with the parameters CouchDB's `couch_stream` gives
/// Erlang's zlib (`deflateInit(Z, Level, deflated, 16 + 15, 8, default)`: gzip header with
/// no name and time 0, 32 KB window, memLevel 8, default strategy) and no flush before the
/// end. Both link the system's zlib, whose output for the same input and parameters does not
/// depend on how the input is cut: the stored bytes, hence their MD5 (the attachment's
/// `digest`, part of revision IDs), are CouchDB's.
public final class GzipCompressor {
    private let stream = UnsafeMutablePointer<z_stream>.allocate(capacity: 1)
    private var output = [UInt8](repeating: 0, count: 64 * 1024)

    public init(level: Int) {
        stream.initialize(to: z_stream())
        // Only out of memory fails here (the parameters are valid), and then nothing works.
        let status = deflateInit2_(stream, Int32(max(0, min(9, level))), Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY,
                                   ZLIB_VERSION, Int32(MemoryLayout<z_stream>.size))
        precondition(status == Z_OK, "deflateInit2 failed (\(status))")
    }

    deinit {
        deflateEnd(stream)
        stream.deallocate()
    }

    /// Compresses `input`, handing each piece of output to `emit`; `finish` ends the stream
    /// (no further call may follow).
    public func compress(_ input: UnsafeRawBufferPointer, finish: Bool = false,
                         emit: (UnsafeRawBufferPointer) throws -> Void) rethrows {
        stream.pointee.next_in = UnsafeMutablePointer(mutating: input.baseAddress?.assumingMemoryBound(to: UInt8.self))
        stream.pointee.avail_in = UInt32(input.count)
        var status = Z_OK
        repeat {
            let produced = output.withUnsafeMutableBytes { buffer -> Int in
                stream.pointee.next_out = buffer.baseAddress!.assumingMemoryBound(to: UInt8.self)
                stream.pointee.avail_out = UInt32(buffer.count)
                status = deflate(stream, finish ? Z_FINISH : Z_NO_FLUSH)
                return buffer.count - Int(stream.pointee.avail_out)
            }
            if produced > 0 { try output.withUnsafeBytes { try emit(UnsafeRawBufferPointer(rebasing: $0[..<produced])) } }
            // Without finishing, deflate is done when it has taken all input and has room left.
        } while finish ? status == Z_OK : (stream.pointee.avail_in > 0 || stream.pointee.avail_out == 0)
        stream.pointee.next_in = nil
    }
}

/// A gzip stream decoded piece by piece (an attachment stored compressed, served to a client
/// that does not accept gzip). `decompress` throws on bytes that are not gzip.
public final class GzipDecompressor {
    public struct Corrupt: Error {}
    private let stream = UnsafeMutablePointer<z_stream>.allocate(capacity: 1)
    private var output = [UInt8](repeating: 0, count: 64 * 1024)
    public private(set) var isFinished = false

    public init() {
        stream.initialize(to: z_stream())
        let status = inflateInit2_(stream, 16 + MAX_WBITS, ZLIB_VERSION, Int32(MemoryLayout<z_stream>.size))
        precondition(status == Z_OK, "inflateInit2 failed (\(status))")
    }

    deinit {
        inflateEnd(stream)
        stream.deallocate()
    }

    /// Decodes `input`, handing each piece of output to `emit`; bytes after the end of the
    /// gzip stream are ignored.
    public func decompress(_ input: UnsafeRawBufferPointer, emit: (UnsafeRawBufferPointer) throws -> Void) throws {
        guard !isFinished, !input.isEmpty else { return }
        stream.pointee.next_in = UnsafeMutablePointer(mutating: input.baseAddress!.assumingMemoryBound(to: UInt8.self))
        stream.pointee.avail_in = UInt32(input.count)
        defer { stream.pointee.next_in = nil }
        repeat {
            var status = Z_OK
            let produced = output.withUnsafeMutableBytes { buffer -> Int in
                stream.pointee.next_out = buffer.baseAddress!.assumingMemoryBound(to: UInt8.self)
                stream.pointee.avail_out = UInt32(buffer.count)
                status = inflate(stream, Z_NO_FLUSH)
                return buffer.count - Int(stream.pointee.avail_out)
            }
            guard status == Z_OK || status == Z_STREAM_END || (status == Z_BUF_ERROR && produced == 0) else { throw Corrupt() }
            if produced > 0 { try output.withUnsafeBytes { try emit(UnsafeRawBufferPointer(rebasing: $0[..<produced])) } }
            if status == Z_STREAM_END {
                isFinished = true
                return
            }
            if status == Z_BUF_ERROR { return }
        } while stream.pointee.avail_in > 0 || stream.pointee.avail_out == 0
    }
}
