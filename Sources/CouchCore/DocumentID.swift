/// A document's ID, with the two reserved prefixes CouchDB gives meaning to.
public struct DocumentID: Hashable, Comparable, Sendable, CustomStringConvertible {
    public let rawValue: String

    public init(_ rawValue: String) { self.rawValue = rawValue }

    public static let localPrefix = "_local/"
    public static let designPrefix = "_design/"
    /// Bytes of UTF-8: three times this, percent-encoded, stays under a 16 KiB URL.
    public static let maximumLength = 4096

    // Prefixes are bytes, as CouchDB matches them (`String.hasBytePrefix`).
    public var isLocal: Bool { rawValue.hasBytePrefix(Self.localPrefix) }
    public var isDesign: Bool { rawValue.hasBytePrefix(Self.designPrefix) }
    /// What follows `_design/` or `_local/` (a design document's name), the whole ID otherwise.
    public var nameAfterPrefix: String {
        isDesign ? rawValue.droppingBytePrefix(Self.designPrefix) : rawValue.droppingBytePrefix(Self.localPrefix)
    }
    public var description: String { rawValue }

    public static func < (lhs: DocumentID, rhs: DocumentID) -> Bool {
        lhs.rawValue.utf8.lexicographicallyPrecedes(rhs.rawValue.utf8)
    }

    /// CouchDB's rule for IDs a client may write: non-empty, valid, and an underscore
    /// only for the reserved prefixes.
    public static func validated(_ raw: String) throws(CouchError) -> DocumentID {
        if raw.isEmpty { throw CouchError(.illegalDocumentID, "Document id must not be empty") }
        // CouchDB's `max_document_id_length` (unlimited there): an ID must fit, percent-encoded,
        // in a URL a peer accepts (16 KiB here), or the document could never be replicated.
        if raw.utf8.count > maximumLength { throw CouchError(.illegalDocumentID, "Document id is too long") }
        let id = DocumentID(raw)
        if raw.utf8.first == UInt8(ascii: "_") {
            if id.isDesign, raw.utf8.count > designPrefix.utf8.count { return id }
            if id.isLocal, raw.utf8.count > localPrefix.utf8.count { return id }
            throw CouchError(.illegalDocumentID, "Only reserved document ids may start with underscore.")
        }
        return id
    }
}
