/// Thrown by `RevisionTree(encoded:)` for bytes that are not a valid encoded tree.
public struct RevisionTreeDecodingError: Error, Sendable {
    public init() {}
}

/// Binary encoding of a revision tree, for a SQLite BLOB.
///
/// Format version 1:
///
///     byte    0x01                         format version
///     varint  node count
///     per node, in `nodes` order (ascending revision):
///       byte    flags: 1 deleted, 2 has body, 4 has parent, 8 digest is 32 lowercase hex chars
///       varint  generation minus the previous node's generation (the first node: the generation)
///       varint  own index minus parent index (>= 1), present only with flag 4
///       digest  with flag 8: the 16 bytes it spells; otherwise varint byte count + UTF-8 bytes
///
/// Varints are unsigned LEB128 (7 bits a byte, low group first, at most 10 bytes).
/// Decoding checks everything the tree relies on: the version, known flags, varint and generation
/// overflow, valid UTF-8, strictly ascending revisions (so no duplicates), parents before children
/// with a generation one less, and no trailing bytes. It never traps on malformed input.
extension RevisionTree {
    static let encodingVersion: UInt8 = 1

    private static let flagDeleted: UInt8 = 1
    private static let flagHasBody: UInt8 = 2
    private static let flagHasParent: UInt8 = 4
    private static let flagHexDigest: UInt8 = 8

    public func encoded() -> [UInt8] {
        var out: [UInt8] = [Self.encodingVersion]
        out.reserveCapacity(2 + nodes.count * 20)
        Self.appendVarint(UInt64(nodes.count), to: &out)
        var previousGeneration = 0
        for (index, node) in nodes.enumerated() {
            let hex = node.revision.md5Bytes
            var flags: UInt8 = 0
            if node.isDeleted { flags |= Self.flagDeleted }
            if node.hasBody { flags |= Self.flagHasBody }
            if node.parent != nil { flags |= Self.flagHasParent }
            if hex != nil { flags |= Self.flagHexDigest }
            out.append(flags)
            // Ascending order makes the delta non-negative; the bit pattern round-trips regardless.
            let delta = index == 0 ? node.revision.generation : node.revision.generation &- previousGeneration
            Self.appendVarint(UInt64(bitPattern: Int64(delta)), to: &out)
            previousGeneration = node.revision.generation
            if let parent = node.parent {
                Self.appendVarint(UInt64(index - parent), to: &out)
            }
            if let hex {
                out.append(contentsOf: hex)
            } else {
                let bytes = Array(node.revision.digest.utf8)
                Self.appendVarint(UInt64(bytes.count), to: &out)
                out.append(contentsOf: bytes)
            }
        }
        return out
    }

    public init(encoded bytes: [UInt8]) throws(RevisionTreeDecodingError) {
        var reader = ByteReader(bytes: bytes)
        guard try reader.byte() == Self.encodingVersion else { throw RevisionTreeDecodingError() }
        let count = try reader.int()
        // Every node takes at least 3 bytes; refuse counts the input cannot hold before allocating.
        guard count <= reader.remaining / 3 else { throw RevisionTreeDecodingError() }
        var nodes: [Node] = []
        nodes.reserveCapacity(count)
        var previousGeneration = 0
        let knownFlags = Self.flagDeleted | Self.flagHasBody | Self.flagHasParent | Self.flagHexDigest
        for index in 0..<count {
            let flags = try reader.byte()
            guard flags & ~knownFlags == 0 else { throw RevisionTreeDecodingError() }
            let delta = try reader.int()
            let (generation, overflow) = (index == 0 ? 0 : previousGeneration).addingReportingOverflow(delta)
            guard !overflow else { throw RevisionTreeDecodingError() }
            previousGeneration = generation
            var parent: Int?
            if flags & Self.flagHasParent != 0 {
                let distance = try reader.int()
                guard distance >= 1, distance <= index else { throw RevisionTreeDecodingError() }
                parent = index - distance
            }
            let revision: RevisionID
            if flags & Self.flagHexDigest != 0 {
                revision = RevisionID(generation: generation, md5: try reader.bytes(16))
            } else {
                let length = try reader.int()
                let raw = try reader.bytes(length)
                guard let text = String(validating: raw, as: UTF8.self) else { throw RevisionTreeDecodingError() }
                revision = RevisionID(generation: generation, digest: text)
            }
            if let previous = nodes.last, RevisionID.order(previous.revision, revision) >= 0 {
                throw RevisionTreeDecodingError()
            }
            if let parent, nodes[parent].revision.generation != generation &- 1 {
                throw RevisionTreeDecodingError()
            }
            nodes.append(Node(revision: revision, parent: parent,
                              isDeleted: flags & Self.flagDeleted != 0,
                              hasBody: flags & Self.flagHasBody != 0))
        }
        guard reader.remaining == 0 else { throw RevisionTreeDecodingError() }
        self.init(validatedNodes: nodes)
    }

    // MARK: - Helpers

    private static func appendVarint(_ value: UInt64, to out: inout [UInt8]) {
        var value = value
        while value >= 0x80 {
            out.append(UInt8(truncatingIfNeeded: value) | 0x80)
            value >>= 7
        }
        out.append(UInt8(value))
    }

}

/// A bounds-checked cursor over the encoded bytes.
private struct ByteReader {
    let bytes: [UInt8]
    var position = 0

    var remaining: Int { bytes.count - position }

    mutating func byte() throws(RevisionTreeDecodingError) -> UInt8 {
        guard position < bytes.count else { throw RevisionTreeDecodingError() }
        defer { position += 1 }
        return bytes[position]
    }

    mutating func bytes(_ count: Int) throws(RevisionTreeDecodingError) -> ArraySlice<UInt8> {
        guard count >= 0, count <= remaining else { throw RevisionTreeDecodingError() }
        defer { position += count }
        return bytes[position..<(position + count)]
    }

    /// An unsigned LEB128 varint that fits in a non-negative `Int`.
    mutating func int() throws(RevisionTreeDecodingError) -> Int {
        var value: UInt64 = 0
        var shift: UInt64 = 0
        while true {
            let next = try byte()
            let group = UInt64(next & 0x7f)
            guard shift < 64, shift < 63 || group <= 1 else { throw RevisionTreeDecodingError() }
            value |= group << shift
            if next & 0x80 == 0 { break }
            shift += 7
        }
        guard value <= UInt64(Int.max) else { throw RevisionTreeDecodingError() }
        return Int(value)
    }
}
