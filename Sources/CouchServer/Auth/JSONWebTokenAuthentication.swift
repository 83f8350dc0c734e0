import CouchCore
import Foundation

/// CouchDB's `jwt_authentication_handler`: `Authorization: Bearer <token>` authenticates
/// the token's `sub`, with the roles of its `_couchdb.roles` claim, once its signature and
/// the claims `[jwt_auth] required_claims` names are good. Keys are `[jwt_keys]` entries
/// `hmac:KID = <base64 secret>`, `rsa:KID = <PEM>`, `ec:KID = <PEM>` (line breaks in a PEM
/// written `\n`), chosen by the token's `kid` (`_default` without one). A token that fails
/// any check refuses the request with CouchDB's error; no other handler is tried.
enum JSONWebTokenAuthentication {
    struct Settings: Sendable {
        enum Claim: String, Sendable {
            case alg, exp, iat, iss, kid, nbf, sig, typ
        }

        /// Claims (and header parameters) that must be present; `iss` may also name its value.
        var requiredClaims: [Claim] = [.exp]
        var requiredIssuer: String?
        /// `[jwt_auth] roles_claim_name`: a top-level claim holding the roles.
        var rolesClaimName = "_couchdb.roles"
        /// `[jwt_auth] roles_claim_path`: the roles' place in nested claims, keys joined by
        /// `.` (a `.` inside a key written `\.`); wins over `roles_claim_name`.
        var rolesClaimPath: [String]?
        /// `[jwt_keys]` by `type:kid`: a key, or why the entry is not one (said per request, as CouchDB).
        var keys: [String: Result<JSONWebToken.Key, CouchError>] = [:]

        init() {}

        init(_ file: ConfigurationFile) throws(ConfigurationError) {
            if let text = file.value("required_claims", in: "jwt_auth") { try readRequiredClaims(text) }
            if let name = file.value("roles_claim_name", in: "jwt_auth"), !name.isEmpty { rolesClaimName = name }
            if let path = file.value("roles_claim_path", in: "jwt_auth"), !path.isEmpty {
                rolesClaimPath = Self.claimPath(path)
            }
            for entry in file.entries(in: "jwt_keys") {
                keys[entry.key] = Self.key(type: entry.key.split(separator: ":").first.map(String.init) ?? "",
                                           text: entry.value)
            }
        }

        /// `exp, iat` or `{iss, "https://issuer"}`, as CouchDB's pattern reads them.
        private mutating func readRequiredClaims(_ text: String) throws(ConfigurationError) {
            requiredClaims = []
            var rest = Substring(text)
            while let start = rest.firstIndex(where: { $0 == "{" || ("a"..."z").contains($0) }) {
                rest = rest[start...]
                let name: Substring
                if rest.first == "{" {
                    guard let close = rest.firstIndex(of: "}") else { break }
                    let inner = rest[rest.index(after: rest.startIndex)..<close]
                    rest = rest[rest.index(after: close)...]
                    let parts = inner.split(separator: ",", maxSplits: 1).map { $0.trimmingWhitespace() }
                    guard parts.count == 2, parts[0] == "iss", parts[1].count >= 2, parts[1].first == "\"",
                          parts[1].last == "\"" else {
                        throw ConfigurationError("[jwt_auth] required_claims: only iss may name a value, as {iss, \"value\"}")
                    }
                    name = "iss"
                    requiredIssuer = String(parts[1].dropFirst().dropLast())
                } else {
                    let end = rest.firstIndex(where: { !("a"..."z").contains($0) }) ?? rest.endIndex
                    name = rest[..<end]
                    rest = rest[end...]
                }
                guard let claim = Claim(rawValue: String(name)) else {
                    throw ConfigurationError("[jwt_auth] required_claims: unknown claim \(name)")
                }
                if !requiredClaims.contains(claim) { requiredClaims.append(claim) }
            }
            if !text.allSatisfy(\.isWhitespace), requiredClaims.isEmpty {
                throw ConfigurationError("[jwt_auth] required_claims is not a list of claims")
            }
        }

        /// `a.b\.c.d` → `["a", "b.c", "d"]`.
        static func claimPath(_ text: String) -> [String] {
            var keys: [String] = []
            var current = ""
            var escaped = false
            for character in text {
                if escaped {
                    if character != "." { current.append("\\") }
                    current.append(character)
                    escaped = false
                } else if character == "\\" {
                    escaped = true
                } else if character == "." {
                    keys.append(current)
                    current = ""
                } else {
                    current.append(character)
                }
            }
            if escaped { current.append("\\") }
            keys.append(current)
            return keys
        }

        static func key(type: String, text: String) -> Result<JSONWebToken.Key, CouchError> {
            let invalid = CouchError.badRequest("Not a valid key")
            switch type {
            case "hmac":
                guard let secret = Base64.decode(text) else { return .failure(invalid) }
                return .success(.secret(secret))
            case "rsa", "ec":
                guard let key = PublicKey(pem: text.replacingOccurrences(of: "\\n", with: "\n")) else {
                    return .failure(invalid)
                }
                if type == "rsa", key.kind != .rsa { return .failure(CouchError.badRequest("not an RSA public key")) }
                if type == "ec", key.kind != .ec { return .failure(CouchError.badRequest("not an EC public key")) }
                return .success(.publicKey(key))
            default:
                return .failure(CouchError.badRequest("Unknown kty"))
            }
        }
    }

    /// The user a `Bearer` token names, nil without one; CouchDB's error for a bad token.
    static func user(_ request: HTTPRequest, settings: Settings, now: Double = Date().timeIntervalSince1970)
        throws(CouchError) -> UserContext? {
        guard let authorization = request.header("authorization"), authorization.hasPrefix("Bearer ") else { return nil }
        let token = try JSONWebToken(String(authorization.dropFirst("Bearer ".count)))
        let required = Set(settings.requiredClaims)
        // The header, then the claims, then the key and signature, in CouchDB's (`jwtf`'s) order.
        switch token.header["typ"] {
        case nil where required.contains(.typ): throw CouchError.badRequest("Missing typ header parameter")
        case let typ? where typ != "JWT": throw CouchError.badRequest("Invalid typ header parameter")
        default: break
        }
        let algorithm = try token.algorithm()
        let claims = token.claims
        if required.contains(.iss) {
            guard let issuer = claims["iss"] else { throw CouchError.badRequest("Missing iss claim") }
            if let expected = settings.requiredIssuer, issuer != JSONValue(expected) {
                throw CouchError.badRequest("Invalid iss claim")
            }
        }
        if required.contains(.iat) {
            guard let issued = claims["iat"] else { throw CouchError.badRequest("Missing iat claim") }
            guard issued.intValue != nil else { throw CouchError.badRequest("Invalid iat claim") }
        }
        if required.contains(.nbf) {
            guard let notBefore = claims["nbf"] else { throw CouchError.badRequest("Missing nbf claim") }
            guard let time = notBefore.doubleValue, time < now.rounded(.down) else {
                throw CouchError(.unauthorized, "nbf not in past")
            }
        }
        if required.contains(.exp) {
            guard let expiry = claims["exp"] else { throw CouchError.badRequest("Missing exp claim") }
            guard let time = expiry.doubleValue, time > now.rounded(.down) else {
                throw CouchError(.unauthorized, "exp not in future")
            }
        }
        let kid: String
        switch token.header["kid"] {
        case .string(let text)?: kid = text
        case nil where !required.contains(.kid): kid = "_default"
        case nil: throw CouchError.badRequest("Missing kid claim")
        case _?: throw CouchError.badRequest("Unknown kid")
        }
        guard let key = settings.keys[algorithm.keyType + ":" + kid] else { throw CouchError.badRequest("Unknown kid") }
        try token.verify(algorithm, key: key.get())
        let roles = try Self.roles(in: claims, settings: settings)
        guard let subject = claims["sub"] else { throw CouchError(.unauthorized, "Token missing sub claim.") }
        guard let name = subject.stringValue else { throw JSONWebToken.malformed }
        return UserContext(name: name, roles: roles, authenticatedBy: "jwt")
    }

    /// The roles claim: a list of strings, or one string of comma-separated roles; none when
    /// absent. 404 when a configured path leads nowhere, as CouchDB answers.
    static func roles(in claims: JSONObject, settings: Settings) throws(CouchError) -> [String] {
        var value: JSONValue?
        if let path = settings.rolesClaimPath {
            var current = JSONValue.object(claims)
            for key in path {
                guard let next = current.objectValue?[key] else {
                    throw CouchError.notFound("missing json key: \(key)")
                }
                current = next
            }
            value = current
        } else {
            value = claims[settings.rolesClaimName]
        }
        switch value {
        case nil: return []
        case .string(let text)?: return ProxyAuthentication.splitRoles(text)
        case .array(let items)?:
            let roles = items.compactMap(\.stringValue)
            guard roles.count == items.count else { throw JSONWebToken.malformed }
            return roles
        case _?: throw JSONWebToken.malformed
        }
    }
}
