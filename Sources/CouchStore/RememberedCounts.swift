import Foundation

/// What a set of rows is, read in the snapshot a count is made in: the sequence and the purges
/// they reflect. A database's document rows change only through writes, each taking a new
/// sequence, and purges, which may remove a row without one; a view's rows only when it indexes
/// up to a new sequence or purge.
public struct RowsState: Equatable, Sendable {
    public let sequence: Int
    public let purges: Int

    public init(sequence: Int, purges: Int) {
        self.sequence = sequence
        self.purges = purges
    }
}

/// Counts of rows past a position in an ordered index (documents changed after a sequence, live
/// documents before an ID), remembered for the state of the rows they were made in. SQLite keeps
/// no counts in its B-trees' inner nodes, as CouchDB's do, so a count costs one step per row
/// counted; a client paging through a large database (`_changes` under `limit`, `_all_docs` with
/// `startkey` and `skip=1`, as PouchDB pages) asks for the count past each page in turn, and
/// counting only the rows between the last page's position and this one makes each page's count
/// cost the page, not the database.
public final class RememberedCounts<Position: Sendable>: @unchecked Sendable {
    public struct Count: Sendable {
        public let position: Position
        public let count: Int

        public init(position: Position, count: Int) {
            self.position = position
            self.count = count
        }
    }

    private let lock = NSLock()
    private var state: RowsState?
    private var counts: [Count] = []
    /// A few clients paging at once each find their last page's count.
    private let capacity = 16
    /// Positions larger than this (bytes of a key or an ID) are not kept: a client's start keys
    /// could otherwise hold 16 × 16 KB in every database it pages through.
    public static var maximumPositionSize: Int { 1024 }

    public init() {}

    /// The counts remembered for rows in `state`.
    public func counts(in state: RowsState) -> [Count] {
        lock.withLock { self.state == state ? counts : [] }
    }

    /// Keeps `count`, made in `state`, unless its position takes more than `maximumPositionSize`
    /// bytes (`size`); counts made in another state are dropped.
    public func remember(_ count: Count, in state: RowsState, size: Int = 0) {
        guard size <= Self.maximumPositionSize else { return }
        lock.withLock {
            if self.state != state {
                self.state = state
                counts.removeAll()
            }
            if counts.count >= capacity { counts.removeFirst() }
            counts.append(count)
        }
    }
}

/// A document ID ordered as SQLite orders the `doc_id` column (its UTF-8 bytes, as `memcmp`),
/// which is not how Swift orders strings.
struct OrderedID: Comparable, Sendable {
    let text: String
    private let bytes: [UInt8]

    init(_ text: String) {
        self.text = text
        bytes = Array(text.utf8)
    }

    static func < (left: OrderedID, right: OrderedID) -> Bool { left.bytes.lexicographicallyPrecedes(right.bytes) }
    static func == (left: OrderedID, right: OrderedID) -> Bool { left.bytes == right.bytes }
}

extension RememberedCounts where Position: Comparable {
    /// The count remembered for rows in `state` at the position nearest `position` on its near
    /// side: below it (at most `position`) for a count of what comes before in ascending order,
    /// above it (at least `position`) in descending order. Counting from there reads only the
    /// rows between, which all lie on the same side as the ones counted.
    public func nearest(to position: Position, descending: Bool, in state: RowsState) -> Count? {
        let nearSide = counts(in: state).filter { descending ? position <= $0.position : $0.position <= position }
        return descending ? nearSide.min { $0.position < $1.position } : nearSide.max { $0.position < $1.position }
    }
}
