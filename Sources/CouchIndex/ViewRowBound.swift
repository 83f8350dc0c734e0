import CouchStore

/// Where a view listing starts, in the rows' order `(key, doc_id)`: a key as stored, and the
/// document ID within the key (nil: after every ID, where a descending listing without
/// `startkey_docid` starts).
struct ViewRowBound: Comparable, Sendable {
    let key: [UInt8]
    let docID: String?
    private let idBytes: [UInt8]?

    init(key: [UInt8], docID: String?) {
        self.key = key
        self.docID = docID
        idBytes = docID.map { Array($0.utf8) }
    }

    /// Bytes of the key and ID.
    var size: Int { key.count + (idBytes?.count ?? 0) }

    /// Stored keys are prefix-free, so their byte order decides before the IDs do.
    static func < (left: ViewRowBound, right: ViewRowBound) -> Bool {
        if left.key != right.key { return left.key.lexicographicallyPrecedes(right.key) }
        switch (left.idBytes, right.idBytes) {
        case (nil, _): return false
        case (_, nil): return true
        case let (leftID?, rightID?): return leftID.lexicographicallyPrecedes(rightID)
        }
    }

    static func == (left: ViewRowBound, right: ViewRowBound) -> Bool {
        left.key == right.key && left.idBytes == right.idBytes
    }

    /// The SQL condition on `rows` comparing a row with this bound (`comparison`: `<`, `<=`, `>`,
    /// `>=`), and its arguments.
    func condition(_ comparison: String) -> (String, [SQLiteValue]) {
        guard let docID else {
            // After every ID of the key: below it is at most the key, above it past the key.
            return (comparison.hasPrefix("<") ? "key <= ?" : "key > ?", [.blob(key)])
        }
        return ("(key, doc_id) \(comparison) (?, ?)", [.blob(key), .text(docID)])
    }
}
