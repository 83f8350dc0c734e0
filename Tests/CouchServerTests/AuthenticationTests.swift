import CouchCore
@testable import CouchServer
import CouchStore
import CouchTestSupport
import Foundation
import Testing

@Suite struct AuthenticationTests {
    @Test func adminPartyMakesEveryoneAnAdminOnLoopback() throws {
        let server = try TestServer()
        defer { server.stop() }
        #expect(server.server.isAdminParty)
        let (status, session) = try server.json("GET", "/_session")
        #expect(status == 200)
        #expect(session == ["ok": true, "userCtx": ["name": nil, "roles": ["_admin"]],
                            "info": ["authentication_handlers": ["cookie", "default"], "authenticated": "default"]])
        #expect(try server.request("PUT", "/db").status == 201)
        #expect(try server.request("GET", "/_all_dbs").status == 200)
    }

    @Test func adminPartyIsRefusedBeyondLoopback() throws {
        let directory = TestServer.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var configuration = ServerConfiguration.testing()
        configuration.listener.bindAddress = "0.0.0.0"
        #expect(throws: ConfigurationError.self) {
            _ = try CouchServer(databases: try DatabaseManager(directory: directory), configuration: configuration)
        }
        configuration.authentication.admins = [AdminEntry(name: "admin", secret: "pw")]
        let server = try CouchServer(databases: try DatabaseManager(directory: directory), configuration: configuration)
        #expect(!server.isAdminParty)
    }

    @Test func basicAuthenticationAndWrongPasswords() throws {
        let fixture = try SecuredServer()
        let server = fixture.server
        let (status, session) = try server.json("GET", "/_session", headers: fixture.credentials("member"))
        #expect(status == 200)
        #expect(session["userCtx"] == ["name": "member", "roles": []])
        #expect(session["info"]?["authenticated"] == "default")
        let admin = try server.json("GET", "/_session", headers: [fixture.admin])
        #expect(admin.json["userCtx"] == ["name": "admin", "roles": ["_admin"]])

        for headers in [[basicAuthorization("member", "wrong")], [basicAuthorization("nobody", "x")],
                        [basicAuthorization("admin", "member-pass-9Zw")]] {
            // Wrong credentials are refused on any route, even one anyone may use.
            let response = try server.request("GET", "/", headers: headers)
            #expect(response.status == 401)
            #expect(try JSONValue.parse(response.body) == ["error": "unauthorized", "reason": "Name or password is incorrect."])
            // CouchDB sends no WWW-Authenticate by default (it would make browsers prompt).
            #expect(response.header("WWW-Authenticate") == nil)
        }
        #expect(try server.request("GET", "/", headers: [("Authorization", "Basic %%%")]).status == 400)
        // A header that is not `Basic <base64>` is ignored: the request goes on anonymously.
        for header in ["Bearer abc", "Basic: YWRtaW46eA==", "basic YWRtaW46eA==", "Digest x"] {
            #expect(try server.request("GET", "/", headers: [("Authorization", header)]).status == 200, "\(header)")
            #expect(try server.json("GET", "/_session", headers: [("Authorization", header)]).json["userCtx"]?["name"] == .null)
            #expect(try server.json("GET", "/secured", headers: [("Authorization", header)]).status == 401)
        }
        // `_:_` is CouchDB's way to send no credentials.
        #expect(try server.json("GET", "/_session", headers: [basicAuthorization("_", "_")]).json["userCtx"]?["name"] == .null)
    }

    @Test func wwwAuthenticateOnlyWhereCouchDBSendsIt() throws {
        let fixture = try SecuredServer()
        let anonymous = try fixture.server.request("GET", "/secured")
        #expect(anonymous.status == 401)
        #expect(anonymous.header("WWW-Authenticate") == nil)
        let asked = try fixture.server.request("GET", "/secured", headers: [("X-CouchDB-WWW-Authenticate", "Cookie")])
        #expect(asked.header("WWW-Authenticate") == "Cookie")
        #expect(try fixture.server.request("GET", "/secured", headers: fixture.credentials("outsider")).header("WWW-Authenticate") == nil)

        let strict = try SecuredServer { $0.authentication.requireValidUser = true }
        let refused = try strict.server.request("GET", "/")
        #expect(refused.status == 401)
        #expect(refused.header("WWW-Authenticate") == "Basic realm=\"server\"")
        #expect(try JSONValue.parse(refused.body)["reason"] == "Authentication required.")
        #expect(try strict.server.request("GET", "/", headers: strict.credentials("outsider")).status == 200)
        // A login attempt is always allowed.
        #expect(try strict.login("member").isEmpty == false)
    }

    @Test func cookieSessionsWithJSONAndFormLogins() throws {
        let fixture = try SecuredServer()
        let server = fixture.server
        let json = try server.request("POST", "/_session", body: #"{"name":"member","password":"member-pass-9Zw"}"#)
        #expect(json.status == 200)
        #expect(try JSONValue.parse(json.body) == ["ok": true, "name": "member", "roles": []])
        let setCookie = try #require(json.header("Set-Cookie"))
        #expect(setCookie.contains("Path=/"))
        #expect(setCookie.contains("HttpOnly"))
        #expect(setCookie.contains("Max-Age=600"))
        let cookie = try #require(sessionCookie(in: json))

        let form = try server.request("POST", "/_session", headers: [("Content-Type", "application/x-www-form-urlencoded")],
                                      body: "name=teammate&password=teammate-pass-9Zw")
        #expect(form.status == 200)
        #expect(try JSONValue.parse(form.body) == ["ok": true, "name": "teammate", "roles": ["team"]])

        let session = try server.json("GET", "/_session", headers: [cookieHeader(cookie)])
        #expect(session.json["userCtx"] == ["name": "member", "roles": []])
        #expect(session.json["info"]?["authenticated"] == "cookie")
        #expect(try server.request("GET", "/secured", headers: [cookieHeader(cookie)]).status == 200)

        let wrong = try server.request("POST", "/_session", body: #"{"name":"member","password":"nope"}"#)
        #expect(wrong.status == 401)
        #expect(try JSONValue.parse(wrong.body) == ["error": "unauthorized", "reason": "Name or password is incorrect."])
        #expect(wrong.header("Set-Cookie")?.hasPrefix("AuthSession=;") == true)
        #expect(try server.request("POST", "/_session", body: #"{"password":"x"}"#).status == 400)

        let next = try server.request("POST", "/_session?next=/secured", body: #"{"name":"member","password":"member-pass-9Zw"}"#)
        #expect(next.status == 302)
        #expect(next.header("Location")?.hasSuffix("/secured") == true)
        #expect(sessionCookie(in: next) != nil)
        let fail = try server.request("POST", "/_session?fail=/login", body: #"{"name":"member","password":"nope"}"#)
        #expect(fail.status == 302)

        let logout = try server.request("DELETE", "/_session", headers: [cookieHeader(cookie)])
        #expect(logout.status == 200)
        #expect(logout.header("Set-Cookie")?.hasPrefix("AuthSession=;") == true)
        #expect(try server.request("PATCH", "/_session").status == 405)
        #expect(try server.request("PUT", "/_session").header("Allow") == "GET,HEAD,POST,DELETE")
    }

    @Test func expiredCookiesAreIgnored() throws {
        // Cookies carry whole seconds: with a 1 s timeout one made late in a second had expired
        // by the next request on a loaded machine. 3 s, and expired for certain 4.1 s later.
        let fixture = try SecuredServer { $0.authentication.sessionTimeout = 3 }
        let cookie = try fixture.login("member")
        #expect(try fixture.server.request("GET", "/secured", headers: [cookieHeader(cookie)]).status == 200)
        Thread.sleep(forTimeInterval: 4.1)
        let session = try fixture.server.json("GET", "/_session", headers: [cookieHeader(cookie)])
        #expect(session.json["userCtx"] == ["name": nil, "roles": []])
        let refused = try fixture.server.request("GET", "/secured", headers: [cookieHeader(cookie)])
        #expect(refused.status == 401)
        #expect(try JSONValue.parse(refused.body)["reason"] == "You are not authorized to access this db.")
    }

    @Test func forgedCookiesAreIgnoredAndMalformedOnesRefused() throws {
        let fixture = try SecuredServer()
        let server = fixture.server
        let genuine = try fixture.login("outsider")
        var bytes = try #require(Base64URL.decode(genuine))
        // Claim to be someone else with outsider's signature.
        let text = String(decoding: bytes, as: UTF8.self)
        #expect(text.hasPrefix("outsider:"))
        let renamed = Array("member".utf8) + bytes.drop(while: { $0 != UInt8(ascii: ":") })
        // Or alter the signature, or the time.
        bytes[bytes.count - 1] ^= 1
        let timeStart = "outsider:".utf8.count
        var later = try #require(Base64URL.decode(genuine))
        later[timeStart] = later[timeStart] == UInt8(ascii: "7") ? UInt8(ascii: "8") : UInt8(ascii: "7")
        // Or sign it with a secret of one's own.
        let foreign = SessionCookie(secret: Digest.randomBytes(32), timeout: 600, persistent: true, sameSite: nil)
        let selfSigned = foreign.value(user: "member", salt: "", time: SessionCookie.now())
        for forged in [Base64URL.encode(renamed), Base64URL.encode(bytes), Base64URL.encode(later), selfSigned] {
            let session = try server.json("GET", "/_session", headers: [cookieHeader(forged)])
            #expect(session.status == 200)
            #expect(session.json["userCtx"]?["name"] == .null)
            #expect(try server.request("GET", "/secured", headers: [cookieHeader(forged)]).status == 401)
        }
        let malformed = try server.json("GET", "/_session", headers: [cookieHeader("not-a-cookie!")])
        #expect(malformed.status == 400)
        #expect(malformed.json["reason"] == "Malformed AuthSession cookie. Please clear your cookies.")
    }

    @Test func cookiesAreRenewedAfterATenthOfTheirLife() throws {
        let fixture = try SecuredServer { $0.authentication.sessionTimeout = 10 }
        let cookie = try fixture.login("member")
        #expect(try fixture.server.request("GET", "/secured", headers: [cookieHeader(cookie)]).header("Set-Cookie") == nil)
        Thread.sleep(forTimeInterval: 2.1)
        let renewed = try fixture.server.request("GET", "/secured", headers: [cookieHeader(cookie)])
        #expect(renewed.status == 200)
        let fresh = try #require(sessionCookie(in: renewed))
        #expect(fresh != cookie)
        #expect(try fixture.server.json("GET", "/_session", headers: [cookieHeader(fresh)]).json["userCtx"]?["name"] == "member")
    }

    @Test func adminsAndSessionsSurviveARestartHashedOnDisk() throws {
        let password = "persist-Me-7781"
        let first = try TestServer(configuration: .testing(admins: ["root": password]))
        let cookieResponse = try first.request("POST", "/_session", body: #"{"name":"root","password":"\#(password)"}"#)
        let cookie = try #require(sessionCookie(in: cookieResponse))
        first.stop(keepData: true)

        let admins = try #require(FileManager.default.contents(atPath: first.directory + "/admins.ini"))
        let text = String(decoding: admins, as: UTF8.self)
        #expect(text.contains("root = -pbkdf2:sha256-"))
        #expect(!text.contains(password))
        for file in ["admins.ini", "session-secret"] {
            let attributes = try FileManager.default.attributesOfItem(atPath: first.directory + "/" + file)
            #expect((attributes[.posixPermissions] as? Int) == 0o600, "\(file)")
        }

        // Started again without --admin: the stored admin still logs in, and its session holds.
        let second = try TestServer(directory: first.directory, configuration: .testing())
        #expect(!second.server.isAdminParty)
        #expect(try second.request("PUT", "/db").status == 401)
        #expect(try second.request("PUT", "/db", headers: [basicAuthorization("root", password)]).status == 201)
        #expect(try second.json("GET", "/_session", headers: [cookieHeader(cookie)]).json["userCtx"]?["name"] == "root")
        second.stop(keepData: true)

        // Given again with the same password, the stored hash stays (and so do sessions);
        // with a new password, the old one and its sessions end.
        let third = try TestServer(directory: first.directory, configuration: .testing(admins: ["root": password]))
        #expect(try third.json("GET", "/_session", headers: [cookieHeader(cookie)]).json["userCtx"]?["name"] == "root")
        third.stop(keepData: true)
        #expect(FileManager.default.contents(atPath: first.directory + "/admins.ini") == admins)
        let fourth = try TestServer(directory: first.directory, configuration: .testing(admins: ["root": "new-Root-pw-1"]))
        defer { fourth.stop() }
        #expect(try fourth.json("GET", "/_session", headers: [cookieHeader(cookie)]).json["userCtx"]?["name"] == .null)
        #expect(try fourth.request("GET", "/", headers: [basicAuthorization("root", password)]).status == 401)
        #expect(try fourth.request("GET", "/_all_dbs", headers: [basicAuthorization("root", "new-Root-pw-1")]).status == 200)
    }

    @Test func adminHashesReadCouchDBsLocalIniForms() throws {
        let hasher = PasswordHasher(iterations: 5)
        let hash = hasher.hash("secret")
        let parsed = try #require(PasswordHash(adminEntry: hash.adminEntry))
        #expect(parsed == hash)
        #expect(try hasher.verify("secret", against: parsed))
        #expect(try !hasher.verify("Secret", against: parsed))
        // CouchDB 2's SHA-1 form, and a sha512 one.
        let salt = "0123456789abcdef0123456789abcdef"
        let sha1Key = Digest.hex(Digest.pbkdf2(password: Array("pw".utf8), salt: Array(salt.utf8), iterations: 10, function: .sha1))
        let sha1 = try #require(PasswordHash(adminEntry: "-pbkdf2-\(sha1Key),\(salt),10"))
        #expect(try hasher.verify("pw", against: sha1))
        #expect(PasswordHash(adminEntry: "plain password") == nil)
        #expect(PasswordHash(adminEntry: "-pbkdf2:md5-aa,bb,1") == nil)
        // RFC 6070-style vector for PBKDF2-HMAC-SHA256 ("password", "salt", 1 iteration).
        #expect(Digest.hex(Digest.pbkdf2(password: Array("password".utf8), salt: Array("salt".utf8), iterations: 1))
                == "120fb6cffcf8b32c43e7225256c4f837a86548c92ccc35480805987cb70be17b")
    }
}
