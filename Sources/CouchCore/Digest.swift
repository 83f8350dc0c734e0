import CCrypto

/// Digests from the system's libcrypto.
public enum Digest {
    /// OpenSSL 3 looks an algorithm up in its providers each time `EVP_md5()` is used (a lock
    /// and hash-table lookups costing more than the MD5 of a 1 KB revision): fetched once.
    /// A fetched `EVP_MD` is immutable and may be shared by threads (OpenSSL's threading notes).
    nonisolated(unsafe) static let md5Algorithm: OpaquePointer? = EVP_MD_fetch(nil, "MD5", nil) ?? EVP_md5()
    nonisolated(unsafe) static let sha1Algorithm: OpaquePointer? = EVP_MD_fetch(nil, "SHA1", nil) ?? EVP_sha1()
    nonisolated(unsafe) static let sha256Algorithm: OpaquePointer? = EVP_MD_fetch(nil, "SHA256", nil) ?? EVP_sha256()

    public static func md5(_ bytes: [UInt8]) -> [UInt8] {
        var output = [UInt8](repeating: 0, count: Int(MD5_DIGEST_LENGTH))
        bytes.withUnsafeBufferPointer { input in
            output.withUnsafeMutableBufferPointer { out in
                var length: UInt32 = 0
                _ = EVP_Digest(input.baseAddress, input.count, out.baseAddress, &length, md5Algorithm, nil)
            }
        }
        return output
    }

    /// SHA-1 (Mango's generated index names are 40 hex digits of one, as CouchDB's).
    public static func sha1(_ bytes: [UInt8]) -> [UInt8] {
        var output = [UInt8](repeating: 0, count: 20)
        bytes.withUnsafeBufferPointer { input in
            output.withUnsafeMutableBufferPointer { out in
                var length: UInt32 = 0
                _ = EVP_Digest(input.baseAddress, input.count, out.baseAddress, &length, sha1Algorithm, nil)
            }
        }
        return output
    }

    /// Lower-case hexadecimal digits, as CouchDB writes digests (`Base16` reads them back).
    /// Inlinable, so that callers in other modules get it specialised for their collection
    /// (unspecialised, it looked up generic metadata for every byte: 7% of a GET's CPU).
    @inlinable
    public static func hex<Bytes: Collection>(_ bytes: Bytes) -> String where Bytes.Element == UInt8 {
        String(unsafeUninitializedCapacity: bytes.count * 2) { output in
            func digit(_ nibble: UInt8) -> UInt8 { nibble < 10 ? UInt8(ascii: "0") + nibble : UInt8(ascii: "a") - 10 + nibble }
            var index = 0
            for byte in bytes {
                output[index] = digit(byte >> 4)
                output[index + 1] = digit(byte & 0x0f)
                index += 2
            }
            return index
        }
    }

    /// Cryptographically random bytes (UUIDs, secrets), from the kernel's generator
    /// (`getrandom`, through the standard library's system generator): the server needs
    /// random bytes while it starts, and libcrypto's generator would initialise its
    /// providers there, 2 MB of memory before any request needs a digest.
    public static func randomBytes(_ count: Int) -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        var bytes = [UInt8]()
        bytes.reserveCapacity(count + 7)
        while bytes.count < count {
            withUnsafeBytes(of: generator.next() as UInt64) { bytes.append(contentsOf: $0) }
        }
        bytes.removeLast(bytes.count - count)
        return bytes
    }

    public static func randomHex(bytes count: Int = 16) -> String { hex(randomBytes(count)) }
}
