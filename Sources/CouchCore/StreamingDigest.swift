import CCrypto

/// A digest computed over data arriving in pieces (attachment uploads).
public final class StreamingDigest {
    public enum Algorithm { case md5, sha256 }
    private let context: OpaquePointer

    public init(_ algorithm: Algorithm) {
        context = EVP_MD_CTX_new()
        EVP_DigestInit_ex(context, algorithm == .md5 ? Digest.md5Algorithm : Digest.sha256Algorithm, nil)
    }

    deinit { EVP_MD_CTX_free(context) }

    public func update(_ bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return }
        EVP_DigestUpdate(context, base, bytes.count)
    }

    public func update(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { update($0) }
    }

    public func finish() -> [UInt8] {
        var output = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        output.withUnsafeMutableBufferPointer { _ = EVP_DigestFinal_ex(context, $0.baseAddress, &length) }
        return Array(output.prefix(Int(length)))
    }
}
