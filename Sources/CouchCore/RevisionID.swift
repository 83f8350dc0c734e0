/// A CouchDB revision identifier, written `N-digest`: `N` is the generation (the number of edits
/// from the document's first revision, 1 for that first revision) and `digest` identifies the edit,
/// usually 32 lowercase hexadecimal characters (an MD5), but peers may send any string.
///
/// Equality, hashing and ordering all work on the digest's UTF-8 bytes, never on Swift's
/// Unicode-canonical `String` comparison, so that the three agree with each other and with
/// CouchDB (which compares revision ids as Erlang binaries).
public struct RevisionID: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// The generation: >= 1 for documents; 0 is used only by `_local` documents ("0-1", "0-2", ...).
    public let generation: Int
    /// The part after the first `-`.
    public let digest: String

    /// Builds an identifier from its parts without validating them.
    public init(generation: Int, digest: String) {
        self.generation = generation
        self.digest = digest
    }

    /// Parses `N-digest`. `N` is decimal digits only (no sign, no spaces; leading zeros are accepted
    /// as Erlang's `list_to_integer` accepts them, so "01-a" is "1-a") and must fit in `Int`.
    /// The digest is everything after the first `-`: it must be non-empty and contain no whitespace.
    public init?(_ text: String) {
        // Read from the string's contiguous UTF-8 in one pass: this runs for every row
        // a listing or a feed writes.
        var text = text
        guard let (generation, digest) = text.withUTF8({ Self.parse($0) }) else { return nil }
        self.init(generation: generation, digest: digest)
    }

    /// Parses `N-digest` from its UTF-8 bytes (a stored column), as `init?(_:)` parses text,
    /// without building the whole text first.
    public init?(utf8 bytes: UnsafeRawBufferPointer) {
        guard let (generation, digest) = bytes.withMemoryRebound(to: UInt8.self, { Self.parse($0) }) else { return nil }
        self.init(generation: generation, digest: digest)
    }

    private static func parse(_ bytes: UnsafeBufferPointer<UInt8>) -> (Int, String)? {
        guard let dash = bytes.firstIndex(of: UInt8(ascii: "-")), dash > 0 else { return nil }
        var value = 0
        for byte in bytes[..<dash] {
            guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
            let (shifted, overflow1) = value.multipliedReportingOverflow(by: 10)
            let (sum, overflow2) = shifted.addingReportingOverflow(Int(byte &- UInt8(ascii: "0")))
            if overflow1 || overflow2 { return nil }
            value = sum
        }
        let digestBytes = UnsafeBufferPointer(rebasing: bytes[(dash + 1)...])
        // An empty digest ("1-") is accepted, as CouchDB's `parse_rev` accepts it.
        // ASCII digests (the usual hex) are checked byte by byte; only others need
        // Unicode's whitespace table, which is slow on the read path.
        var isASCII = true, isHex = true, hasUpperHex = false
        for byte in digestBytes {
            if byte >= 0x80 {
                isASCII = false
                isHex = false
            } else if byte == 0x20 || (0x09...0x0d).contains(byte) {
                return nil
            } else if Base16.value(byte) == nil {
                isHex = false
            } else if byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "F") {
                hasUpperHex = true
            }
        }
        var digest = String(decoding: digestBytes, as: UTF8.self)
        if !isASCII, digest.unicodeScalars.contains(where: { $0.properties.isWhitespace }) { return nil }
        // CouchDB holds a 32-hex-digit digest as the 16 bytes it encodes and writes it back in
        // lower case, so "1-ABC…" and "1-abc…" are the same revision.
        if isHex, hasUpperHex, digestBytes.count == 32 { digest = digest.lowercased() }
        return (value, digest)
    }

    /// Appends the identifier as a JSON string (`"N-digest"`) without building `description`.
    public func appendJSON(to output: inout [UInt8]) {
        var digest = digest
        let plain = digest.withUTF8 { bytes in
            // Characters JSON needs escaped (and non-ASCII, which the writer's escaping decides on)
            // take the general path.
            for byte in bytes where byte < 0x20 || byte >= 0x80 || byte == 0x22 || byte == 0x5C { return false }
            output.append(UInt8(ascii: "\""))
            JSONWriter.appendInteger(generation, to: &output)
            output.append(UInt8(ascii: "-"))
            output.append(contentsOf: bytes)
            output.append(UInt8(ascii: "\""))
            return true
        }
        if !plain { JSONWriter.appendString(description, to: &output) }
    }

    /// The digest with a 32-hex-digit one in lower case, as parsing leaves it.
    var normalizedDigest: String {
        Self.isHex32(digest.utf8) ? digest.lowercased() : digest
    }

    /// The digest as CouchDB holds it (`couch_doc:parse_revid`): 32 hexadecimal digits become
    /// the 16 bytes they encode; any other digest is its UTF-8 bytes.
    public var digestBinary: [UInt8] {
        let utf8 = digest.utf8
        guard Self.isHex32(utf8), let bytes = Base16.decode(utf8) else { return Array(utf8) }
        return bytes
    }

    static func isHex32<Bytes: Collection>(_ bytes: Bytes) -> Bool where Bytes.Element == UInt8 {
        bytes.count == 32 && bytes.allSatisfy { Base16.value($0) != nil }
    }

    public var description: String { "\(generation)-\(digest)" }

    public static func == (lhs: RevisionID, rhs: RevisionID) -> Bool {
        lhs.generation == rhs.generation && compareBytes(lhs.digest, rhs.digest) == 0
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(generation)
        var bytes = digest
        bytes.withUTF8 { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
    }

    /// CouchDB's order: generation first, then the digests' UTF-8 bytes.
    public static func < (lhs: RevisionID, rhs: RevisionID) -> Bool {
        order(lhs, rhs) < 0
    }

    /// Three-way comparison in CouchDB's order: negative, zero or positive. Digests compare as
    /// the Erlang binaries CouchDB holds (`digestBinary`): two lower-case hex digests compare as
    /// their text does; a hex digest against another kind compares by the bytes it encodes.
    static func order(_ lhs: RevisionID, _ rhs: RevisionID) -> Int {
        if lhs.generation != rhs.generation { return lhs.generation < rhs.generation ? -1 : 1 }
        // Equal digests, what a tree lookup ends on, need neither scan below.
        if lhs.digest == rhs.digest { return 0 }
        let leftHex = isHex32(lhs.digest.utf8), rightHex = isHex32(rhs.digest.utf8)
        if leftHex == rightHex { return compareBytes(lhs.digest, rhs.digest) }
        let binaryOrder = compareBinaries(lhs.digestBinary, rhs.digestBinary)
        return binaryOrder != 0 ? binaryOrder : compareBytes(lhs.digest, rhs.digest)
    }

    private static func compareBinaries(_ a: [UInt8], _ b: [UInt8]) -> Int {
        for (x, y) in zip(a, b) where x != y { return x < y ? -1 : 1 }
        return a.count == b.count ? 0 : (a.count < b.count ? -1 : 1)
    }

    /// Compares two strings by their UTF-8 bytes (shorter prefix first), as Erlang compares binaries.
    static func compareBytes(_ lhs: String, _ rhs: String) -> Int {
        var left = lhs
        var right = rhs
        return left.withUTF8 { a in
            right.withUTF8 { b in
                let common = min(a.count, b.count)
                var i = 0
                while i < common {
                    if a[i] != b[i] { return a[i] < b[i] ? -1 : 1 }
                    i += 1
                }
                return a.count == b.count ? 0 : (a.count < b.count ? -1 : 1)
            }
        }
    }
}
