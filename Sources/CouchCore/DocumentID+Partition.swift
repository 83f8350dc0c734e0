/// Partitioned databases (`PUT /db?partitioned=true`): every document ID but design and
/// local ones is `partition:rest`, and queries may ask for one partition's rows only.
extension DocumentID {
    /// The partition of a partitioned database's document, or nil for design and local
    /// documents and IDs without a `:`.
    public var partition: String? {
        guard !isDesign, !isLocal, let colon = rawValue.firstIndex(of: ":") else { return nil }
        return String(rawValue[..<colon])
    }

    /// CouchDB's `couch_partition:validate_docid`, for an ID already valid as any ID.
    public func validateForPartitionedDatabase() throws(CouchError) {
        guard !isDesign, !isLocal else { return }
        guard let colon = rawValue.firstIndex(of: ":") else {
            throw CouchError(.illegalDocumentID, "Doc id must be of form partition:id")
        }
        try Self.validatePartition(String(rawValue[..<colon]))
        _ = try Self.validated(String(rawValue[rawValue.index(after: colon)...]))
    }

    /// CouchDB's `couch_partition:validate_partition`.
    public static func validatePartition(_ partition: String) throws(CouchError) {
        if partition.isEmpty { throw CouchError(.illegalPartition, "Partition must not be empty") }
        if partition.utf8.first == UInt8(ascii: "_") { throw CouchError(.illegalPartition, "Partition must not start with an underscore") }
    }

    /// The IDs of a partition's documents sort in `[low, high)`: `p:` up to `p;` (`;` follows `:`).
    public static func partitionRange(_ partition: String) -> (low: String, high: String) {
        (partition + ":", partition + ";")
    }
}
