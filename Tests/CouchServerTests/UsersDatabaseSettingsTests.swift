import CouchCore
import CouchServer
import CouchTestSupport
import Foundation
import Testing

/// The users database as CouchDB's settings shape it: another database named by
/// `[chttpd_auth] authentication_db`, `password_regexp`, the hashing settings (`iterations`,
/// `pbkdf2_prf`, `upgrade_hash_on_auth`) and user documents in conflict.
@Suite struct UsersDatabaseSettingsTests {
    static func setConfig(_ fixture: SecuredServer, _ section: String, _ key: String, _ value: String) throws {
        let response = try fixture.server.request("PUT", "/_node/_local/_config/\(section)/\(key)", headers: [fixture.admin],
                                                  body: JSONValue(value).serializedString())
        guard response.status == 200 else { throw TestServerError.unexpected("\(key): \(response.status) \(response.text)") }
    }

    @Test func aConfiguredAuthenticationDatabaseHoldsTheUsers() throws {
        let fixture = try SecuredServer()
        let server = fixture.server
        #expect(try server.request("PUT", "/people", headers: [fixture.admin]).status == 201)
        // Open to all, as `_users` is (its documents guard themselves); once it is the users
        // database, its security object is no longer anyone's to change.
        try fixture.setSecurity("people", #"{"members":{"names":[],"roles":[]}}"#)
        try Self.setConfig(fixture, "chttpd_auth", "authentication_db", "people")
        #expect(try server.request("PUT", "/people/_security", headers: [fixture.admin], body: "{}").status == 403)
        let (_, session) = try server.json("GET", "/_session")
        #expect(session["info"]?["authentication_db"] == "people")

        // Written there, a password is hashed; `_design/_auth` is not there yet (CouchDB installs it when
        // its auth cache next starts watching), so only the rules guarding privileges apply.
        let user = #"{"_id":"org.couchdb.user:tom","name":"tom","roles":[],"password":"cat-9"}"#
        #expect(try server.request("POST", "/people", headers: [fixture.admin], body: user).status == 201)
        let stored = try server.json("GET", "/people/org.couchdb.user:tom", headers: [fixture.admin]).json
        #expect(stored["password"] == nil)
        #expect(stored["derived_key"]?.stringValue?.count == 64)
        let roles = #"{"_id":"org.couchdb.user:eve","name":"eve","roles":["boss"],"password":"x"}"#
        #expect(try server.json("POST", "/people", body: roles).json["reason"] == "Only _admin may set roles")

        let tom = try server.json("GET", "/_session", headers: [basicAuthorization("tom", "cat-9")])
        #expect(tom.json["userCtx"] == ["name": "tom", "roles": []])
        // `_users` no longer holds the credentials.
        #expect(try server.request("GET", "/", headers: fixture.credentials("member")).status == 401)
        // A user reads only their own document there.
        #expect(try server.request("GET", "/people/org.couchdb.user:tom", headers: [basicAuthorization("tom", "cat-9")]).status == 200)
        #expect(try server.request("GET", "/people/_all_docs", headers: [basicAuthorization("tom", "cat-9")]).status == 401)

        // Deleting `_users` (CouchDB's auth cache then restarts on the configured database) installs it.
        #expect(try server.request("GET", "/people/_design/_auth", headers: [fixture.admin]).status == 404)
        #expect(try server.request("DELETE", "/_users", headers: [fixture.admin]).status == 200)
        #expect(try server.request("GET", "/people/_design/_auth", headers: [fixture.admin]).status == 200)
        let shapeless = #"{"_id":"org.couchdb.user:kim","name":"kim","roles":[],"password":"x"}"#
        #expect(try server.json("POST", "/people", body: shapeless).json["reason"] == "doc.type must be user")
    }

    @Test func newPasswordsFollowThePasswordRules() throws {
        let fixture = try SecuredServer()
        let server = fixture.server
        let rules = #"[{".{10,}"}, {"[A-Z]+", "Requirement 2."}, {"[a-z]+", ""}, {"\\d+", "Req 4."}, "[!.,()]+"]"#
        try Self.setConfig(fixture, "couch_httpd_auth", "password_regexp", rules)
        func attempt(_ password: String) throws -> (Int, JSONValue) {
            let body = #"{"name":"jchris","type":"user","roles":[],"password":"\#(password)"}"#
            let (status, json) = try server.json("PUT", "/_users/org.couchdb.user:jchris", headers: [fixture.admin], body: body)
            return (status, json["reason"] ?? .null)
        }
        #expect(try attempt("funnybone") == (400, "Password does not conform to requirements."))
        #expect(try attempt("funnnnnybone") == (400, "Password does not conform to requirements. Requirement 2."))
        #expect(try attempt("FUNNNNNYBONE") == (400, "Password does not conform to requirements."))
        #expect(try attempt("funnnnnyBONE") == (400, "Password does not conform to requirements. Req 4."))
        #expect(try attempt("funnnnnyB0N3") == (400, "Password does not conform to requirements."))
        #expect(try attempt("funnnnnyB0N3!").0 == 201)
        // A value that is not a list of patterns stops every new password, not the server.
        for broken in [#"{{".{10,}"}}"#, #"[{".{10,}"]"#, #"["(unclosed"]"#] {
            try Self.setConfig(fixture, "couch_httpd_auth", "password_regexp", broken)
            let body = #"{"name":"joe","type":"user","roles":[],"password":"querty"}"#
            let refused = try server.json("PUT", "/_users/org.couchdb.user:joe", headers: [fixture.admin], body: body)
            #expect(refused.status == 403)
            #expect(refused.json["reason"] == "Server cannot hash passwords at this time.")
        }
    }

    @Test func hashingSettingsApplyToNewPasswordsAndUpgradesAtLogin() throws {
        let fixture = try SecuredServer()
        let server = fixture.server
        func stored(_ name: String) throws -> JSONValue {
            try server.json("GET", "/_users/org.couchdb.user:\(name)", headers: [fixture.admin]).json
        }
        try Self.setConfig(fixture, "chttpd_auth", "iterations", "3")
        try Self.setConfig(fixture, "chttpd_auth", "pbkdf2_prf", "sha512")
        try fixture.createUser("tom", password: "mp3")
        let first = try stored("tom")
        #expect(first["iterations"] == 3)
        #expect(first["pbkdf2_prf"] == "sha512")
        #expect(first["derived_key"]?.stringValue?.count == 128)
        #expect(try server.request("GET", "/", headers: [basicAuthorization("tom", "mp3")]).status == 200)

        // With `upgrade_hash_on_auth`, a login rehashes with the new settings, keeping the salt.
        try Self.setConfig(fixture, "chttpd_auth", "iterations", "4")
        try Self.setConfig(fixture, "chttpd_auth", "upgrade_hash_on_auth", "true")
        #expect(try server.request("GET", "/", headers: [basicAuthorization("tom", "mp3")]).status == 200)
        var upgraded = try stored("tom")
        for _ in 0..<100 where upgraded["iterations"] != 4 {
            Thread.sleep(forTimeInterval: 0.05)
            upgraded = try stored("tom")
        }
        #expect(upgraded["iterations"] == 4)
        #expect(upgraded["salt"] == first["salt"])
        #expect(upgraded["derived_key"] != first["derived_key"])
        #expect(upgraded["preserve_salt"] == nil)
        #expect(try server.request("GET", "/", headers: [basicAuthorization("tom", "mp3")]).status == 200)
        #expect(try server.json("PUT", "/_node/_local/_config/chttpd_auth/pbkdf2_prf", headers: [fixture.admin],
                                body: #""md5""#).status == 400)
    }

    @Test func aUserDocumentInConflictDoesNotAuthenticate() throws {
        let fixture = try SecuredServer()
        let server = fixture.server
        let (_, current) = try server.json("GET", "/_users/org.couchdb.user:member", headers: [fixture.admin])
        // A second branch, as replication brings one.
        var branch = current.objectValue ?? [:]
        branch["_rev"] = "1-00000000000000000000000000000001"
        branch["foo"] = "bar"
        let written = try server.json("POST", "/_users/_bulk_docs", headers: [fixture.admin],
                                      body: JSONValue.object(["docs": [.object(branch)], "new_edits": false]).serializedString())
        #expect(written.status == 201)
        let refused = try server.json("GET", "/_session", headers: fixture.credentials("member"))
        #expect(refused.status == 401)
        #expect(refused.json["reason"]?.stringValue?.contains("conflicts must be resolved") == true)
        try UsersDatabaseSettingsTests.setConfig(fixture, "chttpd_auth", "allow_conflicted_user_docs", "true")
        #expect(try server.json("GET", "/_session", headers: fixture.credentials("member")).json["userCtx"]?["name"] == "member")
    }
}
