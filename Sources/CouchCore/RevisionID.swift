/// A CouchDB revision identifier, written `N-digest`: `N` is the generation (the number of edits
/// from the document's first revision, 1 for that first revision) and `digest` identifies the edit,
/// usually 32 lowercase hexadecimal characters (an MD5), but peers may send any string.
///
/// Equality, hashing and ordering all work on the digest's UTF-8 bytes, never on Swift's
/// Unicode-canonical `String` comparison, so that the three agree with each other and with
/// CouchDB (which compares revision ids as Erlang binaries).
///
/// A digest of 32 lower-case hexadecimal digits, what CouchDB makes, is held as the 16 bytes it
/// spells: reading one (a row of a feed or a listing, a node of a stored tree) allocates nothing,
/// and two compare as two pairs of integers. Any other digest is held as its text. The two forms
/// never hold the same digest, so equality and hashing may compare forms first.
public struct RevisionID: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// The generation: >= 1 for documents; 0 is used only by `_local` documents ("0-1", "0-2", ...).
    public let generation: Int
    private let storedDigest: StoredDigest

    private enum StoredDigest: Sendable {
        /// 32 lower-case hex digits, as the big-endian halves of the 16 bytes they spell.
        case md5(UInt64, UInt64)
        case text(String)
    }

    /// Builds an identifier from its parts without validating them.
    public init(generation: Int, digest: String) {
        self.init(generation: generation, digest: digest, acceptingUpperCaseHex: false)
    }

    /// As `init(generation:digest:)`, but a digest of 32 hex digits in either case is held as the
    /// bytes it spells (written back in lower case), as parsing holds it.
    public init(generation: Int, normalizingDigest digest: String) {
        self.init(generation: generation, digest: digest, acceptingUpperCaseHex: true)
    }

    private init(generation: Int, digest: String, acceptingUpperCaseHex: Bool) {
        self.generation = generation
        var digest = digest
        storedDigest = digest.withUTF8 { Self.md5Halves(hex: $0, acceptingUpperCase: acceptingUpperCaseHex) }
            .map { .md5($0.0, $0.1) } ?? .text(digest)
    }

    /// An identifier whose digest spells the 16 `bytes` in lower-case hex (a new revision's MD5).
    public init<Bytes: Collection>(generation: Int, md5 bytes: Bytes) where Bytes.Element == UInt8 {
        precondition(bytes.count == 16, "an MD5 is 16 bytes")
        self.generation = generation
        var high: UInt64 = 0, low: UInt64 = 0
        for (index, byte) in bytes.enumerated() {
            if index < 8 { high = high << 8 | UInt64(byte) } else { low = low << 8 | UInt64(byte) }
        }
        storedDigest = .md5(high, low)
    }

    /// The part after the first `-`.
    public var digest: String {
        switch storedDigest {
        case .text(let text): return text
        case .md5(let high, let low):
            return String(unsafeUninitializedCapacity: 32) { buffer in
                Self.writeHex(high, low, into: UnsafeMutableRawBufferPointer(buffer))
                return 32
            }
        }
    }

    /// The 16 bytes of a digest of 32 lower-case hex digits; nil for any other digest.
    public var md5Bytes: [UInt8]? {
        guard case .md5(let high, let low) = storedDigest else { return nil }
        return (0..<16).map { UInt8(truncatingIfNeeded: ($0 < 8 ? high : low) >> (56 - 8 * ($0 % 8))) }
    }

    /// The halves of the 16 bytes 32 hex digits spell; nil for anything else, and for upper-case
    /// digits unless accepted (an identifier built from unvalidated parts keeps them as written).
    private static func md5Halves(hex bytes: UnsafeBufferPointer<UInt8>, acceptingUpperCase: Bool) -> (UInt64, UInt64)? {
        guard bytes.count == 32, let source = bytes.baseAddress else { return nil }
        // Table lookups without branches: digits and letters come in random order, and a branch
        // per digit mispredicted about every other one (most of the cost of reading a listing's
        // revisions). Any byte that is no digit has its high bit set in the table.
        let table = acceptingUpperCase ? hexValuesAnyCase : hexValuesLowerCase
        var high: UInt64 = 0, low: UInt64 = 0
        var invalid: UInt8 = 0
        table.withUnsafeBufferPointer { values in
            for index in 0..<16 {
                let first = values[Int(source[index])], second = values[Int(source[16 + index])]
                invalid |= first | second
                high = high << 4 | UInt64(first)
                low = low << 4 | UInt64(second)
            }
        }
        return invalid & 0x80 == 0 ? (high, low) : nil
    }

    private static let hexValuesLowerCase = hexValues(acceptingUpperCase: false)
    private static let hexValuesAnyCase = hexValues(acceptingUpperCase: true)

    /// Each byte's value as a hex digit; 0xff for a byte that is none.
    private static func hexValues(acceptingUpperCase: Bool) -> [UInt8] {
        (0...255).map { (byte: Int) -> UInt8 in
            switch UInt8(byte) {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): UInt8(byte) - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): UInt8(byte) - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F") where acceptingUpperCase: UInt8(byte) - UInt8(ascii: "A") + 10
            default: 0xff
            }
        }
    }

    private static func writeHex(_ high: UInt64, _ low: UInt64, into buffer: UnsafeMutableRawBufferPointer) {
        hexPairs.withUnsafeBufferPointer { pairs in
            for index in 0..<8 {
                let shift = UInt64(56 - 8 * index)
                buffer.storeBytes(of: pairs[Int(truncatingIfNeeded: (high >> shift) & 0xff)], toByteOffset: 2 * index,
                                  as: UInt16.self)
                buffer.storeBytes(of: pairs[Int(truncatingIfNeeded: (low >> shift) & 0xff)], toByteOffset: 16 + 2 * index,
                                  as: UInt16.self)
            }
        }
    }

    /// Each byte's two lower-case hex digits, as stored in memory (first digit first).
    private static let hexPairs: [UInt16] = (0...255).map { (byte: Int) -> UInt16 in
        let digits = Array("0123456789abcdef".utf8)
        let pair = [digits[byte >> 4], digits[byte & 0xf]]
        return pair.withUnsafeBytes { $0.loadUnaligned(as: UInt16.self) }
    }

    /// Parses `N-digest`. `N` is decimal digits only (no sign, no spaces; leading zeros are accepted
    /// as Erlang's `list_to_integer` accepts them, so "01-a" is "1-a") and must fit in `Int`.
    /// The digest is everything after the first `-`: it must be non-empty and contain no whitespace.
    public init?(_ text: String) {
        // Read from the string's contiguous UTF-8 in one pass: this runs for every row
        // a listing or a feed writes.
        var text = text
        guard let (generation, digest) = text.withUTF8({ Self.parse($0) }) else { return nil }
        self.init(generation: generation, stored: digest)
    }

    private init(generation: Int, stored: StoredDigest) {
        self.generation = generation
        storedDigest = stored
    }

    /// Whether a stored revision's text is what `appendJSON` writes for the revision it spells,
    /// quoted: a generation without leading zeros, then only digits, lower-case letters and dashes
    /// (an MD5 in upper case is written in lower case, a digest with escapes escaped). A listing
    /// writes such a revision without parsing it.
    public static func isWrittenAsStored(_ text: UnsafeRawBufferPointer) -> Bool {
        guard let dash = text.firstIndex(of: UInt8(ascii: "-")), dash > 0, dash <= 18,
              text[0] != UInt8(ascii: "0") else { return false }
        for byte in text[..<dash] where byte < UInt8(ascii: "0") || byte > UInt8(ascii: "9") { return false }
        // One table lookup a byte, no branch: digits and letters come in random order.
        var rejected: UInt8 = 0
        storedTextBytes.withUnsafeBufferPointer { table in
            for byte in text[(dash + 1)...] { rejected |= table[Int(byte)] }
        }
        return rejected == 0
    }

    /// 0 for the bytes `isWrittenAsStored` lets through a digest, 1 for the others.
    private static let storedTextBytes: [UInt8] = (0...255).map { (byte: Int) -> UInt8 in
        switch UInt8(byte) {
        case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "-"): 0
        default: 1
        }
    }

    /// Parses `N-digest` from its UTF-8 bytes (a stored column), as `init?(_:)` parses text,
    /// without building the whole text first.
    public init?(utf8 bytes: UnsafeRawBufferPointer) {
        guard let (generation, digest) = bytes.withMemoryRebound(to: UInt8.self, { Self.parse($0) }) else { return nil }
        self.init(generation: generation, stored: digest)
    }

    private static func parse(_ bytes: UnsafeBufferPointer<UInt8>) -> (Int, StoredDigest)? {
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
        // CouchDB holds a 32-hex-digit digest as the 16 bytes it encodes and writes it back in
        // lower case, so "1-ABC…" and "1-abc…" are the same revision.
        if let (high, low) = md5Halves(hex: digestBytes, acceptingUpperCase: true) { return (value, .md5(high, low)) }
        // An empty digest ("1-") is accepted, as CouchDB's `parse_rev` accepts it.
        // ASCII digests are checked byte by byte; only others need Unicode's whitespace table,
        // which is slow on the read path.
        var isASCII = true
        for byte in digestBytes {
            if byte >= 0x80 {
                isASCII = false
            } else if byte == 0x20 || (0x09...0x0d).contains(byte) {
                return nil
            }
        }
        let digest = String(decoding: digestBytes, as: UTF8.self)
        if !isASCII, digest.unicodeScalars.contains(where: { $0.properties.isWhitespace }) { return nil }
        return (value, .text(digest))
    }

    /// Appends the identifier as a JSON string (`"N-digest"`) without building `description`.
    public func appendJSON(to output: inout [UInt8]) {
        appendJSON(to: &output, generation: true)
    }

    /// Appends the digest alone as a JSON string (an id of `_revisions`).
    public func appendDigestJSON(to output: inout [UInt8]) {
        appendJSON(to: &output, generation: false)
    }

    private func appendJSON(to output: inout [UInt8], generation withGeneration: Bool) {
        func appendOpening() {
            output.append(UInt8(ascii: "\""))
            guard withGeneration else { return }
            JSONWriter.appendInteger(generation, to: &output)
            output.append(UInt8(ascii: "-"))
        }
        if case .md5(let high, let low) = storedDigest {
            appendOpening()
            withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 33) { digits in
                Self.writeHex(high, low, into: UnsafeMutableRawBufferPointer(digits))
                digits[32] = UInt8(ascii: "\"")
                output.append(contentsOf: digits)
            }
            return
        }
        var digest = digest
        let plain = digest.withUTF8 { bytes in
            // Characters JSON needs escaped (and non-ASCII, which the writer's escaping decides on)
            // take the general path.
            for byte in bytes where byte < 0x20 || byte >= 0x80 || byte == 0x22 || byte == 0x5C { return false }
            appendOpening()
            output.append(contentsOf: bytes)
            output.append(UInt8(ascii: "\""))
            return true
        }
        if !plain { JSONWriter.appendString(withGeneration ? description : digest, to: &output) }
    }

    /// The digest as CouchDB holds it (`couch_doc:parse_revid`): 32 hexadecimal digits become
    /// the 16 bytes they encode; any other digest is its UTF-8 bytes.
    public var digestBinary: [UInt8] {
        if let bytes = md5Bytes { return bytes }
        let utf8 = digest.utf8
        guard Self.isHex32(utf8), let bytes = Base16.decode(utf8) else { return Array(utf8) }
        return bytes
    }

    static func isHex32<Bytes: Collection>(_ bytes: Bytes) -> Bool where Bytes.Element == UInt8 {
        bytes.count == 32 && bytes.allSatisfy { Base16.value($0) != nil }
    }

    public var description: String {
        guard case .md5(let high, let low) = storedDigest, generation >= 0 else { return "\(generation)-\(digest)" }
        // Written in one buffer: every answer naming a revision builds this (an ETag, a `rev`).
        var digits = 1
        var rest = generation
        while rest >= 10 {
            digits += 1
            rest /= 10
        }
        return String(unsafeUninitializedCapacity: digits + 33) { buffer in
            var value = generation
            for index in stride(from: digits - 1, through: 0, by: -1) {
                buffer[index] = UInt8(ascii: "0") + UInt8(value % 10)
                value /= 10
            }
            buffer[digits] = UInt8(ascii: "-")
            Self.writeHex(high, low, into: UnsafeMutableRawBufferPointer(UnsafeMutableBufferPointer(rebasing: buffer[(digits + 1)...])))
            return digits + 33
        }
    }

    public static func == (lhs: RevisionID, rhs: RevisionID) -> Bool {
        guard lhs.generation == rhs.generation else { return false }
        switch (lhs.storedDigest, rhs.storedDigest) {
        case let (.md5(a, b), .md5(c, d)): return a == c && b == d
        case let (.text(a), .text(b)): return compareBytes(a, b) == 0
        default: return false  // a text digest is never 32 lower-case hex digits
        }
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(generation)
        switch storedDigest {
        case let .md5(high, low):
            hasher.combine(high)
            hasher.combine(low)
        case .text(var text):
            text.withUTF8 { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
        }
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
        // Lower-case hex digits sort as the bytes they spell.
        if case let (.md5(a, b), .md5(c, d)) = (lhs.storedDigest, rhs.storedDigest) {
            return a != c ? (a < c ? -1 : 1) : (b == d ? 0 : (b < d ? -1 : 1))
        }
        // Equal digests, what a tree lookup ends on, need neither scan below.
        let left = lhs.digest, right = rhs.digest
        if compareBytes(left, right) == 0 { return 0 }
        let leftHex = isHex32(left.utf8), rightHex = isHex32(right.utf8)
        if leftHex == rightHex { return compareBytes(left, right) }
        let binaryOrder = compareBinaries(lhs.digestBinary, rhs.digestBinary)
        return binaryOrder != 0 ? binaryOrder : compareBytes(left, right)
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
