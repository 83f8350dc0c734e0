import CCrypto
import CouchCore
import Foundation

/// The four OAuth 1.0a secrets of a replication endpoint's `auth.oauth`.
public struct OAuthCredentials: Sendable, Equatable {
    public var consumerKey: String
    public var consumerSecret: String
    public var token: String
    public var tokenSecret: String
    /// Only `HMAC-SHA1` (CouchDB's replicator supported no other).
    public var signatureMethod: String

    public init(consumerKey: String, consumerSecret: String, token: String, tokenSecret: String,
                signatureMethod: String = "HMAC-SHA1") {
        self.consumerKey = consumerKey
        self.consumerSecret = consumerSecret
        self.token = token
        self.tokenSecret = tokenSecret
        self.signatureMethod = signatureMethod
    }

    init(json: JSONValue) throws(ReplicationError) {
        func field(_ name: String) throws(ReplicationError) -> String {
            guard let value = json[name]?.stringValue else { throw .badRequest("`auth.oauth` needs a `\(name)` string") }
            return value
        }
        self.init(consumerKey: try field("consumer_key"), consumerSecret: try field("consumer_secret"),
                  token: try field("token"), tokenSecret: try field("token_secret"),
                  signatureMethod: json["signature_method"]?.stringValue ?? "HMAC-SHA1")
        guard signatureMethod == "HMAC-SHA1" else {
            throw .badRequest("Unsupported OAuth signature method: \(signatureMethod)")
        }
    }
}

/// Signs requests as RFC 5849 (OAuth 1.0) section 3 describes: the signature base string
/// of method, base string URI and normalised parameters (3.4.1), HMAC-SHA1 keyed with
/// the two secrets (3.4.2), sent in an `Authorization: OAuth ...` header (3.5.1).
public struct OAuthSigner: Sendable {
    public let credentials: OAuthCredentials

    public init(credentials: OAuthCredentials) {
        self.credentials = credentials
    }

    /// The `Authorization` header value for a request. `formParameters` are the members of
    /// an `application/x-www-form-urlencoded` body (none for JSON bodies).
    public func authorization(method: String, url: String, formParameters: [(String, String)] = [],
                              nonce: String = Digest.randomHex(bytes: 8),
                              timestamp: Int = Int(Date().timeIntervalSince1970),
                              realm: String? = nil) -> String {
        var protocolParameters: [(String, String)] = [
            ("oauth_consumer_key", credentials.consumerKey),
        ]
        if !credentials.token.isEmpty { protocolParameters.append(("oauth_token", credentials.token)) }
        protocolParameters += [
            ("oauth_signature_method", credentials.signatureMethod),
            ("oauth_timestamp", String(timestamp)),
            ("oauth_nonce", nonce),
        ]
        let base = Self.signatureBaseString(
            method: method, url: url,
            parameters: protocolParameters + Self.queryParameters(of: url) + formParameters)
        let signature = Self.hmacSHA1Signature(base, consumerSecret: credentials.consumerSecret,
                                               tokenSecret: credentials.tokenSecret)
        var fields: [String] = []
        if let realm { fields.append("realm=\"\(realm)\"") }
        for (name, value) in protocolParameters + [("oauth_signature", signature)] {
            fields.append("\(Self.encode(name))=\"\(Self.encode(value))\"")
        }
        return "OAuth " + fields.joined(separator: ", ")
    }

    /// 3.4.1: `METHOD&encoded base URI&encoded normalised parameters`.
    public static func signatureBaseString(method: String, url: String, parameters: [(String, String)]) -> String {
        method.uppercased() + "&" + encode(baseStringURI(url)) + "&" + encode(normalizedParameters(parameters))
    }

    /// 3.4.1.2: scheme and host in lower case, the port only when not the default, the
    /// path, no query or fragment.
    public static func baseStringURI(_ url: String) -> String {
        guard let schemeEnd = url.range(of: "://") else { return url }
        let scheme = url[..<schemeEnd.lowerBound].lowercased()
        var rest = url[schemeEnd.upperBound...]
        if let cut = rest.firstIndex(where: { $0 == "?" || $0 == "#" }) { rest = rest[..<cut] }
        let pathStart = rest.firstIndex(of: "/") ?? rest.endIndex
        var authority = rest[..<pathStart].lowercased()
        if let at = authority.lastIndex(of: "@") { authority = String(authority[authority.index(after: at)...]) }
        if (scheme == "http" && authority.hasSuffix(":80")) || (scheme == "https" && authority.hasSuffix(":443")) {
            authority = String(authority[..<authority.lastIndex(of: ":")!])
        }
        let path = rest[pathStart...]
        return scheme + "://" + authority + (path.isEmpty ? "/" : String(path))
    }

    /// 3.4.1.3.2: each name and value encoded, sorted by name then value, joined with `=` and `&`.
    public static func normalizedParameters(_ parameters: [(String, String)]) -> String {
        let encoded: [(name: String, value: String)] = parameters.map { (encode($0.0), encode($0.1)) }
        let sorted = encoded.sorted { lhs, rhs in
            lhs.name == rhs.name ? lhs.value < rhs.value : lhs.name < rhs.name
        }
        return sorted.map { $0.name + "=" + $0.value }.joined(separator: "&")
    }

    /// 3.4.1.3.1: the query's parameters, decoded as a form (`+` is a space).
    public static func queryParameters(of url: String) -> [(String, String)] {
        guard let question = url.firstIndex(of: "?") else { return [] }
        var query = url[url.index(after: question)...]
        if let hash = query.firstIndex(of: "#") { query = query[..<hash] }
        return formParameters(String(query))
    }

    /// Name/value pairs of an `application/x-www-form-urlencoded` text.
    public static func formParameters(_ text: String) -> [(String, String)] {
        text.split(separator: "&", omittingEmptySubsequences: true).map { pair in
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let decode = { (part: Substring) in PercentDecoding.decodeLeniently(part, plusIsSpace: true) }
            return (decode(parts[0]), parts.count > 1 ? decode(parts[1]) : "")
        }
    }

    /// 3.4.2: base64 of HMAC-SHA1 keyed with `encode(consumer secret)&encode(token secret)`.
    public static func hmacSHA1Signature(_ baseString: String, consumerSecret: String, tokenSecret: String) -> String {
        let key = Array((encode(consumerSecret) + "&" + encode(tokenSecret)).utf8)
        let message = Array(baseString.utf8)
        var output = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        _ = key.withUnsafeBytes { keyBytes in
            message.withUnsafeBufferPointer { messageBytes in
                HMAC(EVP_sha1(), keyBytes.baseAddress, Int32(key.count), messageBytes.baseAddress, message.count,
                     &output, &length)
            }
        }
        return Base64.encode(output.prefix(Int(length)))
    }

    /// 3.6: unreserved characters stay, everything else is `%XX` (upper case).
    public static func encode(_ text: String) -> String { URLEncoding.component(text) }
}
