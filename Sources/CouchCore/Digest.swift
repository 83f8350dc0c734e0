import CCrypto

/// Digests from the system's libcrypto.
public enum Digest {
    public static func md5(_ bytes: [UInt8]) -> [UInt8] {
        var output = [UInt8](repeating: 0, count: Int(MD5_DIGEST_LENGTH))
        bytes.withUnsafeBufferPointer { input in
            output.withUnsafeMutableBufferPointer { out in
                var length: UInt32 = 0
                _ = EVP_Digest(input.baseAddress, input.count, out.baseAddress, &length, EVP_md5(), nil)
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
                _ = EVP_Digest(input.baseAddress, input.count, out.baseAddress, &length, EVP_sha1(), nil)
            }
        }
        return output
    }

    /// Lower-case hexadecimal digits, as CouchDB writes digests (`Base16` reads them back).
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

    /// Cryptographically random bytes (UUIDs, secrets).
    public static func randomBytes(_ count: Int) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        let ok = bytes.withUnsafeMutableBufferPointer { RAND_bytes($0.baseAddress, Int32(count)) }
        precondition(ok == 1, "libcrypto could not produce random bytes")
        return bytes
    }

    public static func randomHex(bytes count: Int = 16) -> String { hex(randomBytes(count)) }
}
