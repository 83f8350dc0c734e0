import CouchCore

/// A view row's place in its view as one byte string whose plain byte order is the rows'
/// order, `(key, doc_id, dup)`: the stored key (a `Collation.sortKey`, prefix-free; led by the
/// partition's in a partitioned index), the document ID with each 0x00 written 0x00 0xFF and
/// ended by 0x00, then `dup` in eight big-endian bytes. Stored reductions (`ReductionTree`)
/// name their nodes and bounds this way, so every comparison is one `memcmp`.
enum RowPosition {
    static func encode(key: some Collection<UInt8>, docID: String, dup: Int) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(key.count + docID.utf8.count + 10)
        bytes += key
        appendDocID(docID, to: &bytes)
        for shift in stride(from: 56, through: 0, by: -8) { bytes.append(UInt8(truncatingIfNeeded: dup >> shift)) }
        return bytes
    }

    private static func appendDocID(_ id: String, to bytes: inout [UInt8]) {
        for byte in id.utf8 {
            bytes.append(byte)
            if byte == 0 { bytes.append(0xFF) }
        }
        bytes.append(0)
    }

    /// The stored key, document ID and dup of a position; `partitioned`: its key is two
    /// values (the partition's, then the emitted key's). Nil for bytes no row has.
    static func decode(_ bytes: [UInt8], partitioned: Bool) -> (key: [UInt8], docID: String, dup: Int)? {
        guard var end = SortKeyElements.end(of: bytes, from: 0) else { return nil }
        if partitioned {
            guard let next = SortKeyElements.end(of: bytes, from: end) else { return nil }
            end = next
        }
        var id: [UInt8] = []
        var index = end
        while true {
            guard index < bytes.count else { return nil }
            let byte = bytes[index]
            index += 1
            if byte != 0 {
                id.append(byte)
            } else if index < bytes.count, bytes[index] == 0xFF {
                id.append(0)
                index += 1
            } else {
                break
            }
        }
        guard bytes.count - index == 8 else { return nil }
        var dup = 0
        for byte in bytes[index...] { dup = dup << 8 | Int(byte) }
        return (Array(bytes[..<end]), String(decoding: id, as: UTF8.self), dup)
    }

    // MARK: Bounds

    /// The positions a range covers, `lower <= position < upper` (nil: no upper bound), as
    /// `ViewIndex.conditions` selects rows (Mango's `after` is not a reduce query's).
    static func bounds(_ range: ViewRange, collation: ViewCollation = .unicode) -> (lower: [UInt8], upper: [UInt8]?) {
        let prefix = range.partition.map(ViewRange.partitionPrefix) ?? []
        var lower = prefix
        var upper: [UInt8]? = prefix.isEmpty ? nil : ViewRange.successor(of: prefix)
        func raise(_ bound: [UInt8]) { if lower.lexicographicallyPrecedes(bound) { lower = bound } }
        func cap(_ bound: [UInt8]) { if upper.map({ bound.lexicographicallyPrecedes($0) }) ?? true { upper = bound } }
        // Past every row of `key` (and `id`): a document ID byte is never 0xFF, nor is `dup`'s first.
        func key(_ key: JSONValue, _ id: String?, pastIt: Bool) -> [UInt8] {
            var bytes = prefix + collation.sortKey(key)
            if let id { appendDocID(id, to: &bytes) }
            if pastIt { bytes.append(0xFF) }
            return bytes
        }
        let (low, high) = range.descending ? (range.endKey, range.startKey) : (range.startKey, range.endKey)
        let (lowID, highID) = range.descending ? (range.endDocID, range.startDocID) : (range.startDocID, range.endDocID)
        let lowInclusive = range.descending ? range.inclusiveEnd : true
        let highInclusive = range.descending ? true : range.inclusiveEnd
        if let low { raise(key(low, lowID, pastIt: !lowInclusive)) }
        if let high { cap(key(high, highID, pastIt: highInclusive)) }
        if let bound = range.lowSortKey { raise(prefix + bound) }
        if let bound = range.highSortKey { cap(prefix + bound + [0xFF]) }
        return (lower, upper)
    }
}

/// Walking a `Collation.sortKey` (or `RawCollation.sortKey`) value by value: each value's
/// bytes end where its encoding says (a tag; eight bytes of number; a string's key up to its
/// 0x00; an array's or object's values up to their closing 0x00).
enum SortKeyElements {
    /// The index just past the value that starts at `start`, or nil for bytes no sort key has.
    static func end(of bytes: [UInt8], from start: Int) -> Int? { end(of: bytes[...], from: start) }

    static func end(of bytes: ArraySlice<UInt8>, from start: Int) -> Int? {
        guard start >= bytes.startIndex, start < bytes.endIndex else { return nil }
        switch bytes[start] {
        case 0x01, 0x02, 0x03, 0x11, 0x12, 0x13:
            return start + 1
        case 0x04, 0x10:
            return start + 9 <= bytes.endIndex ? start + 9 : nil
        case 0x05, 0x16:
            guard let zero = bytes[(start + 1)...].firstIndex(of: 0) else { return nil }
            return zero + 1
        case 0x06, 0x07, 0x14, 0x15:
            var index = start + 1
            while index < bytes.endIndex, bytes[index] != 0 {
                guard let next = end(of: bytes, from: index) else { return nil }
                index = next
            }
            return index < bytes.endIndex ? index + 1 : nil
        default:
            return nil
        }
    }

    /// What names a key's group: for `group_level=N` an array key's first N values (fewer
    /// when it has fewer: `[a]` and `[a, b, c]` at level 1 are one group, as CouchDB's
    /// `lists:sublist` makes them), any other key whole; nothing at level 0; the whole key for
    /// `group=true` (`level` nil). Rows of one group are consecutive, since they share these
    /// leading bytes (or are one key).
    static func group(of key: ArraySlice<UInt8>, level: Int?) -> ArraySlice<UInt8> {
        guard let level else { return key }
        if level == 0 { return key[key.startIndex..<key.startIndex] }
        guard key.first == 0x06 || key.first == 0x15 else { return key }   // an array, in either collation
        var index = key.startIndex + 1
        var taken = 0
        while taken < level, index < key.endIndex, key[index] != 0, let next = end(of: key, from: index) {
            index = next
            taken += 1
        }
        return key[key.startIndex..<index]
    }
}
