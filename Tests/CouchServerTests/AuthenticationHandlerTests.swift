import CouchCore
import CouchServer
import CouchTestSupport
import Foundation
import Testing

/// CouchDB's other authentication handlers, configured as in CouchDB: JSON Web Tokens
/// (`jwt_authentication_handler`, `[jwt_keys]`, `[jwt_auth]`), proxy authentication
/// (`proxy_authentication_handler`, `[chttpd_auth] proxy_use_secret`, `secret`), the handler
/// list itself (`[chttpd] authentication_handlers`), and the lockout after failed logins
/// (`[chttpd_auth_lockout]`).
@Suite struct AuthenticationHandlerTests {
    static let allHandlers = "{chttpd_auth, jwt_authentication_handler}, {chttpd_auth, proxy_authentication_handler}, "
        + "{chttpd_auth, cookie_authentication_handler}, {chttpd_auth, default_authentication_handler}"

    /// A server with an admin, every handler on, and these entries set at start.
    static func server(_ entries: [(String, String, String)] = []) throws -> SecuredServer {
        try SecuredServer { configuration in
            configuration.otherEntries.append(.init(section: "chttpd", key: "authentication_handlers", value: allHandlers))
            for (section, key, value) in entries {
                configuration.otherEntries.append(.init(section: section, key: key, value: value))
            }
        }
    }

    static func base64URL(_ bytes: [UInt8]) -> String {
        Base64.encode(bytes).replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    /// An HS256 token of these claims, signed with `secret`.
    static func hs256(_ claims: JSONValue, secret: String, header: JSONValue = ["alg": "HS256", "typ": "JWT"]) -> String {
        let signed = base64URL(Array(header.serializedString().utf8)) + "." + base64URL(Array(claims.serializedString().utf8))
        return signed + "." + base64URL(Digest.hmac(.sha256, key: Array(secret.utf8), message: Array(signed.utf8)))
    }

    static func session(_ server: TestServer, token: String) throws -> (status: Int, json: JSONValue) {
        try server.json("GET", "/_session", headers: [("Authorization", "Bearer " + token)])
    }

    static let secret = "zxczxc12zxczxc12"
    static let hmacKey = ("jwt_keys", "hmac:_default", Base64.encode(Array(secret.utf8)))

    @Test func jwtWithAnHMACKeyAuthenticatesTheSubjectWithItsRoles() throws {
        let fixture = try Self.server([Self.hmacKey])
        let now = Int(Date().timeIntervalSince1970)
        let token = Self.hs256(["sub": "couch@apache.org", "exp": JSONValue(now + 60), "nbf": JSONValue(now - 60),
                                "_couchdb.roles": ["testing"]], secret: Self.secret)
        let (status, session) = try Self.session(fixture.server, token: token)
        #expect(status == 200)
        #expect(session["userCtx"] == ["name": "couch@apache.org", "roles": ["testing"]])
        #expect(session["info"]?["authenticated"] == "jwt")
        #expect(session["info"]?["authentication_handlers"] == ["jwt", "proxy", "cookie", "default"])
        // The roles count in databases as anyone's: `team` is a member role of `secured`.
        let teammate = Self.hs256(["sub": "jwt-user", "exp": JSONValue(now + 60), "_couchdb.roles": "team, other"],
                                  secret: Self.secret)
        let read = try fixture.server.json("GET", "/secured", headers: [("Authorization", "Bearer " + teammate)])
        #expect(read.status == 200)
        // Without a token the other handlers run as before.
        #expect(try fixture.server.json("GET", "/_session", headers: [fixture.admin]).json["info"]?["authenticated"] == "default")
    }

    @Test func jwtFailuresAnswerAsCouchDB() throws {
        let fixture = try Self.server([Self.hmacKey])
        let now = Int(Date().timeIntervalSince1970)
        func refusal(_ token: String) throws -> (Int, String?) {
            let (status, json) = try Self.session(fixture.server, token: token)
            return (status, json["reason"]?.stringValue)
        }
        // `exp` is required by default.
        #expect(try refusal(Self.hs256(["sub": "a"], secret: Self.secret)) == (400, "Missing exp claim"))
        #expect(try refusal(Self.hs256(["sub": "a", "exp": JSONValue(now - 10)], secret: Self.secret)) == (401, "exp not in future"))
        #expect(try refusal(Self.hs256(["sub": "a", "exp": JSONValue(now + 60)], secret: "another secret")) == (400, "Bad HMAC"))
        #expect(try refusal(Self.hs256(["exp": JSONValue(now + 60)], secret: Self.secret)) == (401, "Token missing sub claim."))
        #expect(try refusal("not.a-token") == (400, "Malformed token"))
        #expect(try refusal("abc") == (400, "Malformed token"))
        #expect(try refusal(Self.hs256(["sub": "a", "exp": JSONValue(now + 60)], secret: Self.secret,
                                       header: ["alg": "none"])) == (400, "Invalid alg header parameter"))
        #expect(try refusal(Self.hs256(["sub": "a", "exp": JSONValue(now + 60)], secret: Self.secret,
                                       header: ["alg": "HS256", "kid": "other"])) == (400, "Unknown kid"))
        #expect(try refusal(Self.hs256(["sub": "a", "exp": JSONValue(now + 60), "_couchdb.roles": [1]],
                                       secret: Self.secret)) == (400, "Malformed token"))
        // A token is never tried as a password: no handler after `jwt` runs once it refused.
        let admin = try fixture.server.request("GET", "/_all_dbs", headers: [("Authorization", "Bearer x.y.z")])
        #expect(admin.status == 400)
    }

    @Test func requiredClaimsAndNestedRoles() throws {
        let fixture = try Self.server([Self.hmacKey, ("jwt_auth", "required_claims", #"{iss, "hello"}"#),
                                       ("jwt_auth", "roles_claim_path", #"app.couch\.db.roles"#)])
        let good = Self.hs256(["iss": "hello", "sub": "couch@apache.org",
                               "app": ["couch.db": ["roles": ["nested"]]]], secret: Self.secret)
        let (status, session) = try Self.session(fixture.server, token: good)
        #expect(status == 200)
        #expect(session["userCtx"] == ["name": "couch@apache.org", "roles": ["nested"]])
        let bad = Self.hs256(["iss": "goodbye", "sub": "couch@apache.org"], secret: Self.secret)
        #expect(try Self.session(fixture.server, token: bad).json["reason"] == "Invalid iss claim")
        let noRoles = Self.hs256(["iss": "hello", "sub": "couch@apache.org"], secret: Self.secret)
        let missing = try Self.session(fixture.server, token: noRoles)
        #expect(missing.status == 404)
        #expect(missing.json["reason"] == "missing json key: app")
        // An unknown claim is refused where it is configured, not at every request.
        let refused = try fixture.server.request("PUT", "/_node/_local/_config/jwt_auth/required_claims",
                                                 headers: [fixture.admin], body: #""exp, nonsense""#)
        #expect(refused.status == 400)
    }

    /// Tokens signed by `openssl` with the private halves of these keys (RS256 and ES256),
    /// claims `{"sub":"carol","_couchdb.roles":["reader","writer"]}` and no `exp`.
    static let rsaPublicKey = """
        -----BEGIN PUBLIC KEY-----\\nMIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA0wgzkuu4Nh8yROc4YzYV\\n\
        3K+qafwKLNj4B9LI3/2NwguEWYrd9rVTWyHY+afd1QjGa2dqQy1A7BRQsaeVMbaZ\\ndG5vsR5UBhPyUYtJi1eWYFPB9wEwf1tru8bKQVzI7Usv8XC999u4Y7/w6cRvwSYH\\n\
        5GviIiQKHNLPLH/lqeqfL88GnKcfIxz867laoINJXfSaBIdSM0aGviwqO2JVR3OY\\nS3KmTQzmAbX+32Ajx+YoXjAdXYP2vPPwABzCU1zUSup14tR9O8GXPdpA2xDDpHiv\\n\
        QbcYZa45P99KCmgQxhy+den9zdaX6jR8Belbr/1VnKCvq5wGUPWOzhkzdkkVMmdT\\nqwIDAQAB\\n-----END PUBLIC KEY-----
        """
    static let ecPublicKey = """
        -----BEGIN PUBLIC KEY-----\\nMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEk4QR1NZLdffZ02DUsiDzEAItqBNs\\n\
        rs9/NZbQRLK5tdfDEf7qLng3uV3OKzS7tBGEsl8vyIVsoviUqjmbmqANLQ==\\n-----END PUBLIC KEY-----
        """
    static let rs256Token = "eyJhbGciOiJSUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJjYXJvbCIsIl9jb3VjaGRiLnJvbGVzIjpbInJlYWRlciIsIndyaXRlciJdfQ."
        + "V4NnwyNb-rA_qtdKsKbceB22qkP6PgMkqg943swnoXQWtTfUnka2WdP8aVS8Fl85rf_2cmT0hFu4qvytqb5unnb3rdOeBtPRbEuZRQrQE_Dw7747Q7vaZ-wrimEhTkTWbaEvr10Hd8xpbr5ugKgsY4njGqMGiknyvVIoF6SxTsYa9s57LIY0TDoo6EEFruWV-o8rNgyem3g_DO5tWRUUSmG2vVIBe5vuwZDZvji2_IfPVt3TVupSAAbwmPulbISxslD8H7lm3fz7m2xEkoonXQorj_II3IeDZws2Vu6RKNyNI9bQkiJzB4vVP1JZcpYw95A5N-Yf8fFdgcaJ2-Nmkg"
    static let es256Token = "eyJhbGciOiJFUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJjYXJvbCIsIl9jb3VjaGRiLnJvbGVzIjpbInJlYWRlciIsIndyaXRlciJdfQ."
        + "AG2Czl3V15825uhwqLs8iI1ilUnGJNzlYBSIFk_M34tHk4as7i0pnMfn5meihDPlt5QET0I6z-3Qq7uQMwTXaQ"

    @Test func jwtWithRSAAndECPublicKeys() throws {
        let fixture = try Self.server([("jwt_auth", "required_claims", ""), ("jwt_keys", "rsa:_default", Self.rsaPublicKey),
                                       ("jwt_keys", "ec:_default", Self.ecPublicKey)])
        for token in [Self.rs256Token, Self.es256Token] {
            let (status, session) = try Self.session(fixture.server, token: token)
            #expect(status == 200)
            #expect(session["userCtx"] == ["name": "carol", "roles": ["reader", "writer"]])
            #expect(session["info"]?["authenticated"] == "jwt")
            // One changed byte of the signed part (`carol` → `darol`) breaks the signature.
            var parts = token.split(separator: ".").map(String.init)
            parts[1] = Self.base64URL(Array(#"{"sub":"darol","_couchdb.roles":["reader","writer"]}"#.utf8))
            let forged = try Self.session(fixture.server, token: parts.joined(separator: "."))
            #expect(forged.status == 400)
            #expect(forged.json["reason"] == "Bad signature")
        }
        // An RSA key where an EC key is named is refused when used.
        let swapped = try Self.server([("jwt_auth", "required_claims", ""), ("jwt_keys", "ec:_default", Self.rsaPublicKey)])
        #expect(try Self.session(swapped.server, token: Self.es256Token).json["reason"] == "not an EC public key")
        let garbage = try Self.server([("jwt_auth", "required_claims", ""), ("jwt_keys", "rsa:_default", "not a key")])
        #expect(try Self.session(garbage.server, token: Self.rs256Token).json["reason"] == "Not a valid key")
    }

    @Test func proxyAuthenticationWithAndWithoutASecret() throws {
        let fixture = try Self.server()
        let server = fixture.server
        let headers = [("X-Auth-CouchDB-UserName", "couch@apache.org"), ("X-Auth-CouchDB-Roles", "role_1, role_2")]
        let (_, session) = try server.json("GET", "/_session", headers: headers)
        #expect(session["userCtx"] == ["name": "couch@apache.org", "roles": ["role_1", "role_2"]])
        #expect(session["info"]?["authenticated"] == "proxy")

        let secret = "a-proxy-secret-9f2"
        for (key, value) in [("proxy_use_secret", "true"), ("secret", secret)] {
            #expect(try server.request("PUT", "/_node/_local/_config/chttpd_auth/\(key)", headers: [fixture.admin],
                                       body: JSONValue(value).serializedString()).status == 200)
        }
        // Without the token (or with a wrong one) the proxy's word is not taken.
        #expect(try server.json("GET", "/_session", headers: headers).json["userCtx"]?["name"] == .null)
        let wrong = headers + [("X-Auth-CouchDB-Token", "00")]
        #expect(try server.json("GET", "/_session", headers: wrong).json["userCtx"]?["name"] == .null)
        for function in [HashFunction.sha1, .sha256] {
            let token = Digest.hex(Digest.hmac(function, key: Array(secret.utf8), message: Array("couch@apache.org".utf8)))
            let signed = try server.json("GET", "/_session", headers: headers + [("X-Auth-CouchDB-Token", token)])
            #expect(signed.json["userCtx"] == ["name": "couch@apache.org", "roles": ["role_1", "role_2"]])
        }
    }

    @Test func theHandlerListDecidesWhoIsAsked() throws {
        let fixture = try SecuredServer()
        let server = fixture.server
        let proxyHeaders = [("X-Auth-CouchDB-UserName", "someone")]
        // By default only the cookie and Basic handlers run.
        #expect(try server.json("GET", "/_session", headers: proxyHeaders).json["userCtx"]?["name"] == .null)
        let set = try server.request("PUT", "/_node/_local/_config/chttpd/authentication_handlers", headers: [fixture.admin],
                                     body: #""{couch_httpd_auth, proxy_authentication_handler}, {chttpd_auth, default_authentication_handler}""#)
        #expect(set.status == 200)
        let (_, session) = try server.json("GET", "/_session", headers: proxyHeaders)
        #expect(session["userCtx"]?["name"] == "someone")
        #expect(session["info"]?["authentication_handlers"] == ["proxy", "default"])
        // Cookies are no longer read.
        let cookie = try fixture.login("member")
        #expect(try server.json("GET", "/_session", headers: [cookieHeader(cookie)]).json["userCtx"]?["name"] == .null)
        // A handler CouchDB has but that would open the server (or any unknown one) is refused.
        for value in ["{couch_httpd_auth, null_authentication_handler}", "{my_module, my_handler}"] {
            let refused = try server.request("PUT", "/_node/_local/_config/chttpd/authentication_handlers",
                                             headers: [fixture.admin], body: JSONValue(value).serializedString())
            #expect(refused.status == 400)
        }
    }

    @Test func failedLoginsLockAUserOutFromThatAddress() throws {
        let fixture = try SecuredServer()
        let server = fixture.server
        let wrong = [basicAuthorization("member", "wrong")]
        for _ in 1...5 { #expect(try server.request("GET", "/_all_dbs", headers: wrong).status == 401) }
        let locked = try server.json("GET", "/_all_dbs", headers: wrong)
        #expect(locked.status == 403)
        #expect(locked.json["reason"] == "Account is temporarily locked due to multiple authentication failures")
        // Even the right password waits, through Basic and through a login.
        #expect(try server.request("GET", "/secured", headers: fixture.credentials("member")).status == 403)
        #expect(try server.request("POST", "/_session", body: #"{"name":"member","password":"member-pass-9Zw"}"#).status == 403)
        // Others are not concerned.
        #expect(try server.request("GET", "/secured", headers: fixture.credentials("teammate")).status == 200)
        // A new password (a new salt) starts afresh.
        try fixture.createUserAgain("member", password: "renewed-pass-1")
        #expect(try server.request("GET", "/secured", headers: [basicAuthorization("member", "renewed-pass-1")]).status == 200)
        // Unknown users are not counted by Basic (their requests are refused before any check).
        for _ in 1...7 {
            #expect(try server.request("GET", "/", headers: [basicAuthorization("ghost", "x")]).status == 401)
        }
    }

    @Test func lockoutModes() throws {
        for mode in ["warn", "off"] {
            let fixture = try SecuredServer { configuration in
                configuration.otherEntries.append(.init(section: "chttpd_auth_lockout", key: "mode", value: mode))
            }
            for _ in 1...7 {
                #expect(try fixture.server.request("GET", "/_all_dbs", headers: [basicAuthorization("member", "wrong")]).status == 401)
            }
            #expect(try fixture.server.request("GET", "/secured", headers: fixture.credentials("member")).status == 200)
        }
        let strict = try SecuredServer { configuration in
            configuration.otherEntries.append(.init(section: "chttpd_auth_lockout", key: "threshold", value: "2"))
        }
        for _ in 1...2 {
            #expect(try strict.server.request("POST", "/_session", body: #"{"name":"member","password":"x"}"#).status == 401)
        }
        #expect(try strict.server.request("POST", "/_session", body: #"{"name":"member","password":"x"}"#).status == 403)
    }
}

extension SecuredServer {
    /// Replaces a user's document (and so its password and salt).
    func createUserAgain(_ name: String, password: String) throws {
        let (_, current) = try server.json("GET", "/_users/org.couchdb.user:\(name)", headers: [admin])
        guard let rev = current["_rev"]?.stringValue else { throw TestServerError.unexpected("no user \(name)") }
        let body = #"{"_rev":"\#(rev)","name":"\#(name)","password":"\#(password)","roles":[],"type":"user"}"#
        let response = try server.request("PUT", "/_users/org.couchdb.user:\(name)", headers: [admin], body: body)
        guard response.status == 201 else { throw TestServerError.unexpected("\(response.status) \(response.text)") }
    }
}
