import CCrypto

/// A JSON Web Token (RFC 7519) in its compact form `header.claims.signature`, read and
/// checked as CouchDB's `jwtf` does: the parts base64url-encoded, header and claims JSON
/// objects, signed with HMAC (HS256/384/512), RSA PKCS #1 v1.5 (RS256/384/512) or ECDSA
/// (ES256/384/512, the signature as the two numbers r and s side by side). Errors carry
/// CouchDB's status and reason.
public struct JSONWebToken: Sendable {
    public enum Algorithm: String, Sendable, CaseIterable {
        case hs256 = "HS256", hs384 = "HS384", hs512 = "HS512"
        case rs256 = "RS256", rs384 = "RS384", rs512 = "RS512"
        case es256 = "ES256", es384 = "ES384", es512 = "ES512"

        public var hashFunction: HashFunction {
            switch self {
            case .hs256, .rs256, .es256: .sha256
            case .hs384, .rs384, .es384: .sha384
            case .hs512, .rs512, .es512: .sha512
            }
        }

        /// `[jwt_keys]`'s key type for this algorithm: `hmac`, `rsa` or `ec`.
        public var keyType: String {
            switch self {
            case .hs256, .hs384, .hs512: "hmac"
            case .rs256, .rs384, .rs512: "rsa"
            case .es256, .es384, .es512: "ec"
            }
        }
    }

    public let header: JSONObject
    public let claims: JSONObject
    /// `header.claims` as sent: what the signature covers.
    let signedPart: [UInt8]
    let signature: [UInt8]

    /// Splits and decodes a token; 400 `Malformed token` (or `Not an object`) as CouchDB.
    public init(_ token: String) throws(CouchError) {
        let parts = token.utf8.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard parts.count == 3 else { throw Self.malformed }
        header = try Self.object(parts[0])
        claims = try Self.object(parts[1])
        signedPart = Array(token.utf8[parts[0].startIndex..<parts[1].endIndex])
        guard let signature = Self.base64URL(parts[2]) else { throw Self.malformed }
        self.signature = signature
    }

    public static let malformed = CouchError.badRequest("Malformed token")

    private static func object(_ part: Substring.UTF8View) throws(CouchError) -> JSONObject {
        guard let bytes = base64URL(part), let value = try? JSONValue.parse(bytes) else { throw malformed }
        guard let object = value.objectValue else { throw CouchError.badRequest("Not an object") }
        return object
    }

    /// Base64 with the URL alphabet, padding optional.
    static func base64URL(_ part: Substring.UTF8View) -> [UInt8]? {
        guard !part.contains(UInt8(ascii: "+")), !part.contains(UInt8(ascii: "/")) else { return nil }
        let standard = part.map { byte -> UInt8 in
            switch byte {
            case UInt8(ascii: "-"): UInt8(ascii: "+")
            case UInt8(ascii: "_"): UInt8(ascii: "/")
            default: byte
            }
        }
        return Base64.decode(String(decoding: standard, as: UTF8.self))
    }

    /// The header's `alg`: 400 when missing or not one CouchDB accepts.
    public func algorithm() throws(CouchError) -> Algorithm {
        guard let name = header["alg"] else { throw CouchError.badRequest("Missing alg header parameter") }
        guard let text = name.stringValue, let algorithm = Algorithm(rawValue: text) else {
            throw CouchError.badRequest("Invalid alg header parameter")
        }
        return algorithm
    }

    /// Whether the signature is the one `key` makes over the token: 400 `Bad HMAC` or
    /// `Bad signature` otherwise.
    public func verify(_ algorithm: Algorithm, key: Key) throws(CouchError) {
        switch (algorithm.keyType, key) {
        case ("hmac", .secret(let secret)):
            let expected = Digest.hmac(algorithm.hashFunction, key: secret, message: signedPart)
            guard Digest.constantTimeEquals(expected, signature) else { throw CouchError.badRequest("Bad HMAC") }
        case ("rsa", .publicKey(let publicKey)) where publicKey.kind == .rsa:
            guard publicKey.verify(signature, of: signedPart, with: algorithm.hashFunction) else {
                throw CouchError.badRequest("Bad signature")
            }
        case ("ec", .publicKey(let publicKey)) where publicKey.kind == .ec:
            guard let der = Self.derSignature(fromJOSE: signature),
                  publicKey.verify(der, of: signedPart, with: algorithm.hashFunction) else {
                throw CouchError.badRequest("Bad signature")
            }
        default:
            throw CouchError.badRequest("Bad signature")
        }
    }

    /// ECDSA's `r || s` (each half of the bytes) as the DER `SEQUENCE { INTEGER r, INTEGER s }`
    /// libcrypto verifies.
    static func derSignature(fromJOSE signature: [UInt8]) -> [UInt8]? {
        guard !signature.isEmpty, signature.count % 2 == 0 else { return nil }
        func integer(_ bytes: ArraySlice<UInt8>) -> [UInt8] {
            var value = Array(bytes.drop { $0 == 0 })
            if value.isEmpty || value[0] & 0x80 != 0 { value.insert(0, at: 0) }
            return [0x02] + length(value.count) + value
        }
        func length(_ count: Int) -> [UInt8] {
            if count < 0x80 { return [UInt8(count)] }
            var bytes: [UInt8] = []
            var rest = count
            while rest > 0 {
                bytes.insert(UInt8(rest & 0xff), at: 0)
                rest >>= 8
            }
            return [0x80 | UInt8(bytes.count)] + bytes
        }
        let half = signature.count / 2
        let body = integer(signature[..<half]) + integer(signature[half...])
        return [0x30] + length(body.count) + body
    }

    /// What verifies a token: a shared secret (HMAC) or a public key (RSA, EC).
    public enum Key: Sendable {
        case secret([UInt8])
        case publicKey(PublicKey)
    }
}

/// A public key read from PEM (`-----BEGIN PUBLIC KEY-----`, SubjectPublicKeyInfo) with
/// libcrypto, for verifying signatures.
public final class PublicKey: @unchecked Sendable {
    public enum Kind: Sendable { case rsa, ec, other }

    private let key: OpaquePointer
    public let kind: Kind

    /// nil when the text holds no public key libcrypto can read.
    public init?(pem: String) {
        let bytes = Array(pem.utf8)
        guard let key = bytes.withUnsafeBytes({ raw -> OpaquePointer? in
            guard let bio = BIO_new_mem_buf(raw.baseAddress, Int32(raw.count)) else { return nil }
            defer { BIO_free(bio) }
            return PEM_read_bio_PUBKEY(bio, nil, nil, nil)
        }) else {
            ERR_clear_error()
            return nil
        }
        self.key = key
        switch EVP_PKEY_get_base_id(key) {
        case EVP_PKEY_RSA: kind = .rsa
        case EVP_PKEY_EC: kind = .ec
        default: kind = .other
        }
    }

    deinit { EVP_PKEY_free(key) }

    /// Whether `signature` (PKCS #1 v1.5 for RSA, DER for ECDSA) signs `message` with `function`.
    public func verify(_ signature: [UInt8], of message: [UInt8], with function: HashFunction) -> Bool {
        guard let context = EVP_MD_CTX_new() else { return false }
        defer { EVP_MD_CTX_free(context) }
        guard EVP_DigestVerifyInit(context, nil, function.evp, nil, key) == 1 else {
            ERR_clear_error()
            return false
        }
        let result = signature.withUnsafeBufferPointer { signatureBytes in
            message.withUnsafeBufferPointer { messageBytes in
                EVP_DigestVerify(context, signatureBytes.baseAddress, signatureBytes.count,
                                 messageBytes.baseAddress, messageBytes.count)
            }
        }
        if result != 1 { ERR_clear_error() }
        return result == 1
    }
}
