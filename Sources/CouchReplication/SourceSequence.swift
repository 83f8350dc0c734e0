import CouchCore

/// A position in the source's change feed, exactly as the source wrote it: an opaque string
/// for Couchette and CouchDB 2 and later, a number for CouchDB 1.x. The replicator
/// never orders or does arithmetic on sequences; order comes from the feed itself (see
/// `SequenceMap`). It is sent back as `since` in its JSON form and stored in checkpoints as is.
public struct SourceSequence: Sendable, Hashable, CustomStringConvertible {
    public let json: JSONValue

    public init(_ json: JSONValue) { self.json = json }

    public static let zero = SourceSequence(0)

    /// The value of a `since` query parameter: the JSON text (`12`, `"12-g1AA..."`).
    public var queryValue: String { json.serializedString() }

    /// The leading integer of the sequence, for stores whose sequences are integers
    /// (Couchette's own): `12`, `"12"` and `"12-g1AA..."` all give 12.
    public var leadingInteger: Int? { UpdateSequence(json: json)?.number }

    public var description: String { queryValue }
}
