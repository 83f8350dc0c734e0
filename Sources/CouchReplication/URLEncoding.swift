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

    /// A document ID in a path, as CouchDB's `encode_doc_id`: `_design/` and `_local/`
    /// prefixes keep their slash, the rest is encoded (`/` included).
    static func documentPath(_ id: DocumentID) -> String {
        for prefix in [DocumentID.designPrefix, DocumentID.localPrefix] where id.rawValue.hasPrefix(prefix) {
            return prefix + component(String(id.rawValue.dropFirst(prefix.count)))
        }
        return component(id.rawValue)
    }

    /// `%XX` sequences decoded (invalid ones kept as they are).
    static func percentDecoded(_ text: String) -> String {
        RemotePeer.percentDecoded(Substring(text))
    }

    /// `application/x-www-form-urlencoded`
    static func form(_ fields: [(String, String)]) -> String {
        query(fields)
    }

    private static func encode(_ text: String, keepingSlash: Bool, spaceAsPlus: Bool) -> String {
        let hex = Array("0123456789ABCDEF".utf8)
        var output: [UInt8] = []
        output.reserveCapacity(text.utf8.count)
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                 UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."),
                 UInt8(ascii: "_"), UInt8(ascii: "~"):
                output.append(byte)
            case UInt8(ascii: "/") where keepingSlash:
                output.append(byte)
            case UInt8(ascii: " ") where spaceAsPlus:
                output.append(UInt8(ascii: "+"))
            default:
                output.append(UInt8(ascii: "%"))
                output.append(hex[Int(byte >> 4)])
                output.append(hex[Int(byte & 0x0f)])
            }
        }
        return String(decoding: output, as: UTF8.self)
    }
}
