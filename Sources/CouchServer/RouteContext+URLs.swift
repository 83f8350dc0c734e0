import CouchCore

/// The URLs and validators an answer names: absolute `Location`s built from the host the
/// client asked for, and `If-None-Match` matching.
extension RouteContext {
    /// CouchDB's `chttpd:absolute_uri`: scheme and host from `X-Forwarded-Ssl`/`X-Forwarded-Proto`
    /// and the `[chttpd] x_forwarded_host` header or `Host`, then `path` (already encoded).
    func absoluteURL(_ path: String) -> String {
        let configuration = server.configuration
        let host = request.header(configuration.forwardedHostHeader) ?? request.header("host")
            ?? "\(configuration.listener.bindAddress):\(configuration.listener.port)"
        let secure = request.header("x-forwarded-ssl") == "on" || request.header("x-forwarded-proto") == "https"
        return (secure ? "https://" : "http://") + host + path
    }

    /// `/db/doc` (and `/attachment`), each part encoded as CouchDB's `couch_util:url_encode`.
    func absoluteURL(database: DatabaseName, id: DocumentID? = nil, attachment: String? = nil) -> String {
        var path = "/" + URLEncoding.encode(database.rawValue)
        if let id { path += "/" + URLEncoding.encode(id.rawValue) }
        if let attachment { path += "/" + URLEncoding.encode(attachment) }
        return absoluteURL(path)
    }

    /// Whether `If-None-Match` names `etag` (in a list, weak `W/"..."` forms too, as CouchDB strips them).
    func etagMatches(_ etag: String) -> Bool {
        guard let header = request.header("if-none-match") else { return false }
        return header.split(whereSeparator: { $0 == "," || $0 == " " }).contains { candidate in
            (candidate.hasPrefix("W/") ? candidate.dropFirst(2) : candidate) == etag
        }
    }
}

enum URLEncoding {
    /// CouchDB's `couch_util:url_encode`: letters, digits and `_.-:` as they are, every other
    /// UTF-8 byte as `%XX` (upper-case hex).
    static func encode(_ text: String) -> String {
        var output = ""
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                 UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "_"), UInt8(ascii: "."), UInt8(ascii: "-"),
                 UInt8(ascii: ":"):
                output.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                let hex = String(byte, radix: 16, uppercase: true)
                output += "%" + (hex.count == 1 ? "0" + hex : hex)
            }
        }
        return output
    }
}
