import CouchCore

/// Percent-encoding as CouchDB's replicator writes URLs.
enum URLEncoding {
    /// RFC 3986 unreserved characters stay, every other byte becomes `%XX`.
    static func component(_ text: String) -> String {
        encode(text, keepingSlash: false, spaceAsPlus: false)
    }

    /// A query parameter value as CouchDB's replicator encodes it (mochiweb's
    /// `quote_plus`): letters, digits and `.-~_` stay, a space becomes `+`.
    static func queryValue(_ text: String) -> String {
        encode(text, keepingSlash: false, spaceAsPlus: true)
    }

    /// A query string from parameters in order.
    static func query(_ parameters: [(String, String)]) -> String {
        parameters.map { "\($0.0)=\(queryValue($0.1))" }.joined(separator: "&")
    }

    /// A document ID in a path, as CouchDB's `encode_doc_id`.
    static func documentPath(_ id: DocumentID) -> String {
        PercentEncoding.documentPath(id)
    }

    /// `%XX` sequences decoded (invalid ones kept as they are).
    static func percentDecoded(_ text: String) -> String {
        PercentDecoding.decodeLeniently(Substring(text))
    }

    /// `application/x-www-form-urlencoded`
    static func form(_ fields: [(String, String)]) -> String {
        query(fields)
    }

    private static func encode(_ text: String, keepingSlash: Bool, spaceAsPlus: Bool) -> String {
        PercentEncoding.encode(text, keeping: PercentEncoding.unreservedMarks + (keepingSlash ? [UInt8(ascii: "/")] : []),
                               spaceAsPlus: spaceAsPlus)
    }
}
