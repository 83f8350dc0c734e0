import CouchCore
import CurlClient

/// One end of a replication as the request named it: a database of this server, or a
/// database behind a URL with the headers, credentials and TLS settings to reach it.
public enum ReplicationPeer: Sendable, Equatable {
    case local(DatabaseName)
    case remote(RemotePeer)

    /// For logs, results and `_active_tasks`: a local name, or the URL with its password
    /// replaced by `*****` as CouchDB shows it.
    public var displayName: String {
        switch self {
        case .local(let name): name.rawValue
        case .remote(let peer): peer.displayURL
        }
    }

    /// Reads `"name"`, `"http://user:pass@host/db"` or `{"url", "headers", "auth", ...}`.
    public init(json: JSONValue, role: String) throws(ReplicationError) {
        switch json {
        case .string(let text):
            if RemotePeer.isURL(text) {
                self = .remote(try RemotePeer(url: text, role: role))
            } else {
                guard let name = try? DatabaseName(text) else {
                    throw .badRequest("Invalid \(role) database name: \(text)")
                }
                self = .local(name)
            }
        case .object(let object):
            guard let url = object["url"]?.stringValue else {
                throw .badRequest("`\(role)` object must have a `url` string")
            }
            guard RemotePeer.isURL(url) else {
                guard let name = try? DatabaseName(url) else { throw .badRequest("Invalid \(role) database name: \(url)") }
                self = .local(name)
                return
            }
            var peer = try RemotePeer(url: url, role: role)
            try peer.read(object, role: role)
            self = .remote(peer)
        default:
            throw .badRequest("`\(role)` must be a database name, a URL or an object with a `url`")
        }
    }
}

/// A database reached over HTTP. The URL is kept without its credentials; they travel
/// in `Authorization` headers (or a session cookie), never in a URL that could be logged.
public struct RemotePeer: Sendable, Equatable {
    public var scheme: String
    public var host: String
    /// nil when the URL gave none (the scheme's default).
    public var port: Int?
    /// The database path as given, still percent-encoded, ending with `/` (`/db/`, `/a%2Fb/`).
    public var path: String
    /// The user name given in the URL (part of the replication ID, as in CouchDB).
    public var urlUser: String?
    public var credentials: Credentials?
    public var oauth: OAuthCredentials?
    /// Extra headers sent with every request (e.g. a bearer token), not counting the ones
    /// that carried credentials.
    public var headers: [Header]
    public var tls: HTTPClient.TLSOptions

    public struct Header: Sendable, Equatable, Hashable {
        public var name: String
        public var value: String
        public init(name: String, value: String) {
            self.name = name
            self.value = value
        }
    }

    public struct Credentials: Sendable, Equatable {
        public var user: String
        public var password: String
        public init(user: String, password: String) {
            self.user = user
            self.password = password
        }
    }

    static func isURL(_ text: String) -> Bool {
        let lower = text.lowercased()
        return lower.hasPrefix("http://") || lower.hasPrefix("https://")
    }

    init(url text: String, role: String) throws(ReplicationError) {
        guard let schemeEnd = text.range(of: "://") else { throw .badRequest("Invalid \(role) URL") }
        scheme = text[..<schemeEnd.lowerBound].lowercased()
        var rest = text[schemeEnd.upperBound...]
        if let cut = rest.firstIndex(where: { $0 == "?" || $0 == "#" }) { rest = rest[..<cut] }
        let authorityEnd = rest.firstIndex(of: "/") ?? rest.endIndex
        var authority = rest[..<authorityEnd]
        var path = String(rest[authorityEnd...])
        if path.isEmpty { path = "/" }
        if !path.hasSuffix("/") { path += "/" }
        self.path = path
        credentials = nil
        urlUser = nil
        if let at = authority.lastIndex(of: "@") {
            let userInfo = authority[..<at]
            authority = authority[authority.index(after: at)...]
            let parts = userInfo.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
            let user = PercentDecoding.decodeLeniently(parts[0])
            urlUser = user
            if parts.count == 2 {
                credentials = Credentials(user: user, password: PercentDecoding.decodeLeniently(parts[1]))
            }
        }
        if authority.hasPrefix("["), let close = authority.firstIndex(of: "]") {
            host = String(authority[...close])
            let after = authority[authority.index(after: close)...]
            port = after.hasPrefix(":") ? Int(after.dropFirst()) : nil
        } else if let colon = authority.lastIndex(of: ":") {
            host = String(authority[..<colon])
            guard let number = Int(authority[authority.index(after: colon)...]) else {
                throw .badRequest("Invalid port in \(role) URL")
            }
            port = number
        } else {
            host = String(authority)
            port = nil
        }
        guard scheme == "http" || scheme == "https", !host.isEmpty else { throw .badRequest("Invalid \(role) URL") }
        oauth = nil
        headers = []
        tls = HTTPClient.TLSOptions()
    }

    /// The members of a `{"url", "headers", "auth", ...}` endpoint object.
    mutating func read(_ object: JSONObject, role: String) throws(ReplicationError) {
        if let headerObject = object["headers"] {
            guard let members = headerObject.objectValue else { throw .badRequest("`\(role).headers` must be an object") }
            for (name, value) in members {
                guard let text = value.stringValue else { throw .badRequest("Header values must be strings") }
                if name.lowercased() == "authorization", credentials == nil,
                   let decoded = RemotePeer.basicCredentials(text) {
                    credentials = decoded
                } else {
                    headers.append(Header(name: name, value: text))
                }
            }
        }
        if let auth = object["auth"] {
            guard let members = auth.objectValue else { throw .badRequest("`\(role).auth` must be an object") }
            if let basic = members["basic"] {
                guard let user = basic["username"]?.stringValue, let password = basic["password"]?.stringValue else {
                    throw .badRequest("`auth.basic` needs `username` and `password` strings")
                }
                // As CouchDB, credentials in the URL win over auth.basic.
                if credentials == nil { credentials = Credentials(user: user, password: password) }
            }
            if let oauthValue = members["oauth"] {
                oauth = try OAuthCredentials(json: oauthValue)
            }
        }
        if let caFile = object["ca_file"] {
            guard let path = caFile.stringValue else { throw .badRequest("`ca_file` must be a path") }
            tls.caFile = path
        }
        if let pinned = object["pinned_public_key"] {
            guard let key = pinned.stringValue else { throw .badRequest("`pinned_public_key` must be a string") }
            tls.pinnedPublicKey = key
        }
        if let verify = object["verify_ssl_certificates"] {
            guard let flag = verify.boolValue else { throw .badRequest("`verify_ssl_certificates` must be a boolean") }
            tls.verifyPeer = flag
        }
    }

    /// `scheme://host[:port]`
    public var origin: String {
        scheme + "://" + host + (port.map { ":\($0)" } ?? "")
    }

    /// The database's URL without credentials, ending with `/`.
    public var databaseURL: String { origin + path }

    /// The server root's URL (where `_session` lives), ending with `/`.
    public var rootURL: String { origin + "/" }

    /// The URL as CouchDB shows it: `http://user:*****@host/db/`.
    public var displayURL: String {
        guard let user = urlUser else { return databaseURL }
        let userPart = RemotePeer.percentEncoded(user)
        return scheme + "://" + userPart + (credentials != nil ? ":*****" : "") + "@" + host
            + (port.map { ":\($0)" } ?? "") + path
    }

    /// The port, unless it is a default one (80, 443 and CouchDB's 5984 count as default,
    /// as in CouchDB's replication IDs).
    var nonDefaultPort: Int? {
        guard let port else { return nil }
        if (scheme == "http" && (port == 80 || port == 5984)) || (scheme == "https" && port == 443) { return nil }
        return port
    }

    static func basicCredentials(_ header: String) -> Credentials? {
        let parts = header.split(separator: " ", maxSplits: 1)
        guard parts.count == 2, parts[0].lowercased() == "basic",
              let bytes = Base64.decode(String(parts[1])) else { return nil }
        let text = String(decoding: bytes, as: UTF8.self)
        guard let colon = text.firstIndex(of: ":") else { return nil }
        return Credentials(user: String(text[..<colon]), password: String(text[text.index(after: colon)...]))
    }

    static func percentEncoded(_ text: String) -> String {
        URLEncoding.component(text)
    }
}
