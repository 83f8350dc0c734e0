import CouchCore

/// A key range of a view, as CouchDB's query parameters give it: `startkey`/`endkey` with
/// `startkey_docid`/`endkey_docid`, `inclusive_end`, `descending` (then the start is the
/// high end). A nil key is open on that side.
public struct ViewRange: Sendable {
    public var startKey: JSONValue?
    public var startDocID: String?
    public var endKey: JSONValue?
    public var endDocID: String?
    public var inclusiveEnd = true
    public var descending = false
    /// Only this partition's rows (a partitioned index): its keys are one contiguous range.
    public var partition: String?
    /// Inclusive bounds given as `Collation.sortKey` bytes, whatever the direction (Mango's
    /// prefix ranges end in a byte above every value, which no JSON key can say); within
    /// `partition` when it is set, as `after` is.
    public var lowSortKey: [UInt8]?
    public var highSortKey: [UInt8]?
    /// Rows strictly after this key (sort key bytes) and document ID, in the range's direction.
    public var after: (sortKey: [UInt8], docID: String)?

    public init() {}

    /// What leads every stored key of a partition's rows: the partition's own sort key,
    /// which no other partition's starts with (sort keys are prefix-free).
    public static func partitionPrefix(_ partition: String) -> [UInt8] {
        Collation.sortKey(.string(partition))
    }

    /// The first byte string past every key that starts with `prefix`.
    static func successor(of prefix: [UInt8]) -> [UInt8] {
        var bytes = prefix
        while let last = bytes.last, last == 0xFF { bytes.removeLast() }
        guard !bytes.isEmpty else { return [0xFF] }
        bytes[bytes.count - 1] += 1
        return bytes
    }

    /// Exactly the rows whose key collates equal to `key`.
    public static func key(_ key: JSONValue, descending: Bool = false, partition: String? = nil) -> ViewRange {
        var range = ViewRange()
        range.startKey = key
        range.endKey = key
        range.descending = descending
        range.partition = partition
        return range
    }
}
