/// CouchDB's `[attachments] compressible_types` and `compression_level`: attachments of a
/// compressible type that arrive unencoded are stored gzip-compressed (`GzipCompressor`),
/// their `digest` that of the compressed bytes, as CouchDB's `couch_db:with_stream` stores
/// them; so the same edit gets the same revision ID on both.
public struct AttachmentCompression: Sendable, Equatable {
    public static let defaultTypes = "text/*, application/javascript, application/json, application/xml"
    public static let defaultLevel = 8

    /// The patterns as configured: `*` stands for any run of characters.
    public let types: String
    /// 1–9 compress (zlib's levels); anything else stores every attachment as sent.
    public let level: Int
    private let patterns: [[UInt8]]

    public init(types: String = Self.defaultTypes, level: Int = Self.defaultLevel) {
        self.types = types
        self.level = level
        patterns = types.lowercased().utf8.split(separator: UInt8(ascii: ",")).map { pattern in
            Array(pattern.drop(while: Self.isBlank).reversed().drop(while: Self.isBlank).reversed())
        }.filter { !$0.isEmpty }
    }

    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.types == rhs.types && lhs.level == rhs.level }

    public var isEnabled: Bool { (1...9).contains(level) && !patterns.isEmpty }

    /// Whether an attachment of this type, sent with this encoding, is stored compressed:
    /// only unencoded ones (`identity` or none) of a compressible type.
    public func compresses(contentType: String?, encoding: String? = nil) -> Bool {
        guard isEnabled, encoding == nil || encoding == "identity", let contentType else { return false }
        return isCompressible(contentType)
    }

    /// CouchDB's `compressible_att_type`: the type matches a pattern, caselessly, with blanks
    /// around it and parameters (`; charset=...`) after it allowed — the regular expression
    /// `^\s*PATTERN(?:\s*;.*?)?\s*$` with `*` as `.*`. (Other characters of a pattern are
    /// matched literally, where CouchDB would read them as a regular expression.)
    public func isCompressible(_ contentType: String) -> Bool {
        let type = Array(contentType.lowercased().utf8.drop { Self.isBlank($0) })
        return patterns.contains { Self.matches(type[...], $0[...]) }
    }

    private static func isBlank(_ byte: UInt8) -> Bool { byte == 0x20 || (0x09...0x0d).contains(byte) }

    private static func matches(_ text: ArraySlice<UInt8>, _ pattern: ArraySlice<UInt8>) -> Bool {
        guard let first = pattern.first else { return isTail(text) }
        if first == UInt8(ascii: "*") {
            var rest = text
            while true {
                if matches(rest, pattern.dropFirst()) { return true }
                guard !rest.isEmpty else { return false }
                rest = rest.dropFirst()
            }
        }
        guard text.first == first else { return false }
        return matches(text.dropFirst(), pattern.dropFirst())
    }

    /// What may follow the type: blanks, then nothing or `;` and anything.
    private static func isTail(_ text: ArraySlice<UInt8>) -> Bool {
        let rest = text.drop(while: isBlank)
        return rest.isEmpty || rest.first == UInt8(ascii: ";")
    }
}
