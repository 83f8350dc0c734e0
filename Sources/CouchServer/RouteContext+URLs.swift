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
        var path = "/" + PercentEncoding.encode(database.rawValue, keeping: PercentEncoding.couchURLMarks)
        if let id { path += "/" + PercentEncoding.encode(id.rawValue, keeping: PercentEncoding.couchURLMarks) }
        if let attachment { path += "/" + PercentEncoding.encode(attachment, keeping: PercentEncoding.couchURLMarks) }
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
