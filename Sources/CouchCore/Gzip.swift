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

    public static func compress(_ input: [UInt8]) -> [UInt8] {
        var stream = z_stream()
        deflateInit2_(&stream, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY,
                      ZLIB_VERSION, Int32(MemoryLayout<z_stream>.size))
        defer { deflateEnd(&stream) }
        var output = [UInt8](repeating: 0, count: Int(deflateBound(&stream, UInt(input.count))) + 32)
        input.withUnsafeBufferPointer { source in
            output.withUnsafeMutableBufferPointer { buffer in
                stream.next_in = UnsafeMutablePointer(mutating: source.baseAddress)
                stream.avail_in = UInt32(source.count)
                stream.next_out = buffer.baseAddress
                stream.avail_out = UInt32(buffer.count)
                _ = deflate(&stream, Z_FINISH)
            }
        }
        return Array(output.prefix(Int(stream.total_out)))
    }
}
