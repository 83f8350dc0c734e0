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

    public static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count * 2)
        for byte in bytes {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0f)])
        }
        return String(decoding: out, as: UTF8.self)
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
