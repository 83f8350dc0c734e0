import CouchCore

/// A document as a map function sees it: the winning revision's JSON with `_id`, `_rev`,
/// `_attachments` stubs and `_conflicts` when it has any. Deleted documents are never mapped.
public struct MapInput: Sendable {
    public let id: DocumentID
    /// The document as JSON text (an object).
    public let json: [UInt8]
}

/// One row a map function emitted.
public struct Emission: Sendable {
    public let key: JSONValue
    public let value: JSONValue

    public init(key: JSONValue, value: JSONValue) {
        self.key = key
        self.value = value
    }
}

/// What turns documents into index rows: the JavaScript map functions of a design document,
/// or a native Swift mapper (Mango's JSON indexes emit `[field values...]` keys). One mapper
/// serves every view of an index; `map` may be called from several threads at once on
/// different documents.
public protocol DocumentMapper: Sendable {
    /// Per document (in order), per view (in the index's order), the rows it emits. A
    /// document that a view's function cannot map (it throws) emits nothing for that view;
    /// throwing from `map` fails the whole update (the index stays where it was).
    func map(_ documents: [MapInput]) throws(CouchError) -> [[[Emission]]]
}

/// What an index is: its signature (the name of its file: indexes with equal signatures are
/// one index), the names of its views in the mapper's order, and the mapper.
public struct IndexDefinition: Sendable {
    public let signature: String
    public let viewNames: [String]
    public let mapper: DocumentMapper
    /// Whether design documents are mapped too (CouchDB's `options.include_design`).
    public let includeDesign: Bool
    /// Whether documents carry `_local_seq`, their sequence (CouchDB's `options.local_seq`).
    public let includeLocalSequence: Bool
    /// A partitioned design document's index (partitioned database): each row's stored key is
    /// led by its document's partition, so a partition's rows are one range of the index.
    public let partitioned: Bool
    /// Per view, its reduce function (nil: a map-only view, or an unknown built-in). The
    /// index keeps each one's stored reductions (`ReductionTree`).
    public let reductions: [ViewReduction?]
    /// Per view, how it orders its keys (CouchDB's view option `collation`); a view past the
    /// list's end uses CouchDB's default.
    public let collations: [ViewCollation]

    /// - Parameter signature: a digest of everything that decides the rows (functions,
    ///   language, options), so that a change makes a new index and nothing else does.
    public init(signature: String, viewNames: [String], mapper: DocumentMapper, includeDesign: Bool = false,
                includeLocalSequence: Bool = false, partitioned: Bool = false, reductions: [ViewReduction?] = [],
                collations: [ViewCollation] = []) {
        self.signature = signature
        self.viewNames = viewNames
        self.mapper = mapper
        self.includeDesign = includeDesign
        self.includeLocalSequence = includeLocalSequence
        self.partitioned = partitioned
        self.reductions = reductions
        self.collations = collations
    }

    public func collation(_ view: Int) -> ViewCollation {
        view < collations.count ? collations[view] : .unicode
    }
}
