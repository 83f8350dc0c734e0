import CCrypto

/// The hash functions CouchDB names in `pbkdf2_prf` and in `-pbkdf2:PRF-` admin hashes.
public enum HashFunction: String, Sendable, CaseIterable {
    case sha1 = "sha"
    case sha224
    case sha256
    case sha384
    case sha512

    var evp: OpaquePointer? {
        switch self {
        case .sha1: EVP_sha1()
        case .sha224: EVP_sha224()
        case .sha256: EVP_sha256()
        case .sha384: EVP_sha384()
        case .sha512: EVP_sha512()
        }
    }

    /// The digest length in bytes, which is also CouchDB's derived key length.
    public var digestLength: Int {
        switch self {
        case .sha1: 20
        case .sha224: 28
        case .sha256: 32
        case .sha384: 48
        case .sha512: 64
        }
    }

    /// Reads CouchDB's spelling (`sha`, `sha256`, ...); `sha1` is accepted too.
    public init?(couchName: String) {
        if couchName == "sha1" {
            self = .sha1
            return
        }
        self.init(rawValue: couchName)
    }
}

/// Password hashing and message authentication from the system's libcrypto.
extension Digest {
    /// PBKDF2 (RFC 8018) with an HMAC of `function`; the key is as long as the digest,
    /// as CouchDB derives it.
    public static func pbkdf2(password: [UInt8], salt: [UInt8], iterations: Int,
                              function: HashFunction = .sha256) -> [UInt8] {
        precondition(iterations > 0, "PBKDF2 needs at least one iteration")
        var key = [UInt8](repeating: 0, count: function.digestLength)
        let characters = password.map { CChar(bitPattern: $0) }
        let ok = characters.withUnsafeBufferPointer { passwordBytes in
            salt.withUnsafeBufferPointer { saltBytes in
                key.withUnsafeMutableBufferPointer { keyBytes in
                    PKCS5_PBKDF2_HMAC(passwordBytes.baseAddress, Int32(passwordBytes.count), saltBytes.baseAddress,
                                      Int32(salt.count), Int32(clamping: iterations), function.evp,
                                      Int32(keyBytes.count), keyBytes.baseAddress)
                }
            }
        }
        precondition(ok == 1, "libcrypto could not derive a key")
        return key
    }

    public static func hmac(_ function: HashFunction, key: [UInt8], message: [UInt8]) -> [UInt8] {
        var output = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        key.withUnsafeBufferPointer { keyBytes in
            message.withUnsafeBufferPointer { messageBytes in
                output.withUnsafeMutableBufferPointer { out in
                    _ = HMAC(function.evp, keyBytes.baseAddress, Int32(keyBytes.count),
                             messageBytes.baseAddress, messageBytes.count, out.baseAddress, &length)
                }
            }
        }
        return Array(output.prefix(Int(length)))
    }

    public static func hash(_ function: HashFunction, _ bytes: [UInt8]) -> [UInt8] {
        var output = [UInt8](repeating: 0, count: function.digestLength)
        bytes.withUnsafeBufferPointer { input in
            output.withUnsafeMutableBufferPointer { out in
                var length: UInt32 = 0
                _ = EVP_Digest(input.baseAddress, input.count, out.baseAddress, &length, function.evp, nil)
            }
        }
        return output
    }

    /// Compares secrets in time that depends only on their length, never on where they differ.
    public static func constantTimeEquals(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        if a.isEmpty { return true }
        return a.withUnsafeBytes { left in
            b.withUnsafeBytes { right in CRYPTO_memcmp(left.baseAddress, right.baseAddress, a.count) == 0 }
        }
    }
}
