import CouchCore

/// CouchDB's `proxy_authentication_handler`: a proxy in front of the server that has
/// authenticated the user says who it is in headers (`X-Auth-CouchDB-UserName`, and the
/// roles, comma-separated, in `X-Auth-CouchDB-Roles`). With `[chttpd_auth] proxy_use_secret
/// = true` and a `secret`, the proxy must also send `X-Auth-CouchDB-Token`, the hex HMAC of
/// the name under the secret (with any of `[chttpd_auth] hash_algorithms`, SHA-256 and SHA-1
/// by default); a missing or wrong token leaves the request to the next handler.
enum ProxyAuthentication {
    struct Settings: Sendable {
        var userHeader = "X-Auth-CouchDB-UserName"
        var rolesHeader = "X-Auth-CouchDB-Roles"
        var tokenHeader = "X-Auth-CouchDB-Token"
        var useSecret = false
        var secret: String?
        var hashFunctions: [HashFunction] = [.sha256, .sha1]

        init() {}

        init(_ file: ConfigurationFile) throws(ConfigurationError) {
            func auth(_ key: String) -> String? { file.value(key, in: "chttpd_auth", "couch_httpd_auth") }
            if let name = auth("x_auth_username"), !name.isEmpty { userHeader = name }
            if let name = auth("x_auth_roles"), !name.isEmpty { rolesHeader = name }
            if let name = auth("x_auth_token"), !name.isEmpty { tokenHeader = name }
            useSecret = try AuthenticationSettings.bool(auth("proxy_use_secret"), named: "proxy_use_secret") ?? false
            if let text = auth("secret"), !text.isEmpty { secret = text }
            if let text = auth("hash_algorithms") {
                let names = text.split(separator: ",").map { $0.trimmingWhitespace() }.filter { !$0.isEmpty }
                var functions: [HashFunction] = []
                for name in names {
                    guard let function = HashFunction(couchName: name) else {
                        throw ConfigurationError("hash_algorithms: unknown hash \"\(name)\"")
                    }
                    functions.append(function)
                }
                guard !functions.isEmpty else { throw ConfigurationError("hash_algorithms must name a hash") }
                hashFunctions = functions
            }
        }
    }

    /// The user the proxy vouches for, or nil when the request has no user header or its
    /// token does not match.
    static func user(_ request: HTTPRequest, settings: Settings) -> UserContext? {
        guard let name = request.header(settings.userHeader) else { return nil }
        if settings.useSecret, let secret = settings.secret {
            guard let token = request.header(settings.tokenHeader) else { return nil }
            let given = Array(token.utf8)
            let matches = settings.hashFunctions.contains { function in
                let expected = Digest.hex(Digest.hmac(function, key: Array(secret.utf8), message: Array(name.utf8)))
                return Digest.constantTimeEquals(Array(expected.utf8), given)
            }
            guard matches else { return nil }
        }
        let roles = request.header(settings.rolesHeader).map(splitRoles) ?? []
        return UserContext(name: name, roles: roles, authenticatedBy: "proxy")
    }

    /// `re:split(Roles, "\\s*,\\s*", [trim])`: items around commas, without their blanks;
    /// empty items at the end dropped, those before kept.
    static func splitRoles(_ text: String) -> [String] {
        var roles = text.split(separator: ",", omittingEmptySubsequences: false).map { String($0.trimmingWhitespace()) }
        while roles.last?.isEmpty == true { roles.removeLast() }
        return roles
    }
}
