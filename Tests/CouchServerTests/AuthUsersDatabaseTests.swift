import CouchCore
import CouchServer
import CouchTestSupport
import Foundation
import Testing

@Suite struct AuthUsersDatabaseTests {
    static func userJSON(_ name: String, password: String? = nil, roles: String = "[]", extra: String = "") -> String {
        let passwordMember = password.map { #","password":"\#($0)""# } ?? ""
        return #"{"_id":"org.couchdb.user:\#(name)","name":"\#(name)","type":"user","roles":\#(roles)\#(passwordMember)\#(extra)}"#
    }

    @Test func anonymousSignUpHashesThePasswordAndNeverReturnsIt() throws {
        let fixture = try SecuredServer()
        let server = fixture.server
        let password = "jan-Sign-Up-5521"
        let created = try server.json("PUT", "/_users/org.couchdb.user:jan", body: Self.userJSON("jan", password: password))
        #expect(created.status == 201)

        let document = try server.json("GET", "/_users/org.couchdb.user:jan", headers: [basicAuthorization("jan", password)])
        #expect(document.status == 200)
        let body = document.json
        #expect(body["password"] == nil)
        #expect(body["password_scheme"] == "pbkdf2")
        #expect(body["pbkdf2_prf"] == "sha256")
        #expect(body["iterations"] == 10)
        #expect(body["salt"]?.stringValue?.count == 32)
        #expect(body["derived_key"]?.stringValue?.count == 64)
        #expect(!document.json.serializedString().contains(password))

        #expect(try fixture.login("jan", password: password).isEmpty == false)
        let session = try server.json("GET", "/_session", headers: [basicAuthorization("jan", password)])
        #expect(session.json["userCtx"] == ["name": "jan", "roles": []])
        // And not through the other write paths either.
        let viaPost = try server.json("POST", "/_users", body: Self.userJSON("kim", password: "kim-pw-0001"))
        #expect(viaPost.status == 201)
        let bulk = try server.json("POST", "/_users/_bulk_docs", headers: [fixture.admin],
                                   body: #"{"docs":[\#(Self.userJSON("lee", password: "lee-pw-0002"))]}"#)
        #expect(bulk.status == 201)
        for name in ["kim", "lee"] {
            let stored = try server.json("GET", "/_users/org.couchdb.user:\(name)", headers: [fixture.admin]).json
            #expect(stored["password"] == nil)
            #expect(stored["derived_key"] != nil)
        }
        #expect(try server.request("GET", "/", headers: [basicAuthorization("kim", "kim-pw-0001")]).status == 200)
        #expect(try server.request("GET", "/", headers: [basicAuthorization("lee", "lee-pw-0002")]).status == 200)
    }

    @Test func signUpCannotGrantRolesOrBreakTheFormat() throws {
        let fixture = try SecuredServer()
        let server = fixture.server
        func refusal(_ id: String, _ body: String, headers: [(String, String)] = []) throws -> (Int, JSONValue) {
            let (status, json) = try server.json("PUT", "/_users/\(id)", headers: headers, body: body)
            return (status, json["reason"] ?? .null)
        }
        #expect(try refusal("org.couchdb.user:eve", Self.userJSON("eve", password: "x", roles: #"["team"]"#))
                == (403, "Only _admin may set roles"))
        #expect(try refusal("org.couchdb.user:eve", Self.userJSON("eve", password: "x", roles: #"["_admin"]"#),
                            headers: [fixture.admin]) == (403, "No system roles (starting with underscore) in users db."))
        #expect(try refusal("org.couchdb.user:eve", #"{"name":"eve","type":"person","roles":[]}"#) == (403, "doc.type must be user"))
        #expect(try refusal("org.couchdb.user:eve", #"{"name":"mallory","type":"user","roles":[]}"#)
                == (403, "Doc ID must be of the form org.couchdb.user:name"))
        #expect(try refusal("org.couchdb.user:a:b", #"{"name":"a:b","type":"user","roles":[]}"#)
                == (403, "Character `:` is not allowed in usernames."))
        #expect(try refusal("org.couchdb.user:eve", #"{"name":"eve","type":"user"}"#) == (403, "doc.roles must exist"))
        #expect(try refusal("org.couchdb.user:eve", #"{"name":"eve","type":"user","roles":"x"}"#) == (403, "doc.roles must be an array"))
        #expect(try refusal("org.couchdb.user:eve", #"{"name":"eve","type":"user","roles":[1]}"#)
                == (403, "doc.roles can only contain strings"))
        // An admin may give roles.
        #expect(try server.json("PUT", "/_users/org.couchdb.user:eve", headers: [fixture.admin],
                                body: Self.userJSON("eve", password: "eve-pw", roles: #"["team"]"#)).status == 201)
        #expect(try fixture.attempt("anonymous", "PUT", "/_users/_design/_auth", body: "{}").status == 401)
        #expect(try fixture.attempt("member", "PUT", "/_users/_design/_auth", body: "{}").status == 403)
    }

    @Test func usersReadAndUpdateOnlyTheirOwnDocument() throws {
        let fixture = try SecuredServer()
        let server = fixture.server
        let own = try server.json("GET", "/_users/org.couchdb.user:member", headers: fixture.credentials("member"))
        #expect(own.status == 200)
        #expect(own.json["name"] == "member")
        // Another user's document: as if it did not exist.
        for who in ["outsider", "anonymous"] {
            let other = try server.json("GET", "/_users/org.couchdb.user:member", headers: fixture.credentials(who))
            #expect(other.status == 404, "\(who)")
            #expect(other.json == ["error": "not_found", "reason": "missing"])
        }
        #expect(try server.json("GET", "/_users/org.couchdb.user:member", headers: [fixture.admin]).status == 200)
        let design = try fixture.attempt("member", "GET", "/_users/_design/_auth")
        #expect(design.status == 403)

        // Updating one's own document: password yes, roles no, someone else's no.
        let rev = try #require(own.json["_rev"]?.stringValue)
        let newPassword = "member-New-Pass-77"
        let oldCookie = try fixture.login("member")
        let update = #"{"_rev":"\#(rev)","name":"member","type":"user","roles":[],"password":"\#(newPassword)"}"#
        let updated = try server.json("PUT", "/_users/org.couchdb.user:member", headers: fixture.credentials("member"), body: update)
        #expect(updated.status == 201)
        #expect(try server.request("GET", "/", headers: [basicAuthorization("member", newPassword)]).status == 200)
        #expect(try server.request("GET", "/", headers: fixture.credentials("member")).status == 401)
        // The new salt ends the sessions of the old password.
        #expect(try server.json("GET", "/_session", headers: [cookieHeader(oldCookie)]).json["userCtx"]?["name"] == .null)

        let current = try server.json("GET", "/_users/org.couchdb.user:member", headers: [basicAuthorization("member", newPassword)])
        let rev2 = try #require(current.json["_rev"]?.stringValue)
        let promote = #"{"_rev":"\#(rev2)","name":"member","type":"user","roles":["team"]}"#
        let promoted = try server.json("PUT", "/_users/org.couchdb.user:member",
                                       headers: [basicAuthorization("member", newPassword)], body: promote)
        #expect(promoted.status == 403)
        #expect(promoted.json["reason"] == "Only _admin may edit roles")

        let theirs = try server.json("GET", "/_users/org.couchdb.user:outsider", headers: [fixture.admin])
        let rev3 = try #require(theirs.json["_rev"]?.stringValue)
        let hijack = #"{"_rev":"\#(rev3)","name":"outsider","type":"user","roles":[],"password":"mine"}"#
        #expect(try server.json("PUT", "/_users/org.couchdb.user:outsider", headers: [basicAuthorization("member", newPassword)],
                                body: hijack).status == 404)
        // Anonymous users may only create: updating an existing user is refused.
        let anonymous = try server.json("PUT", "/_users/org.couchdb.user:outsider", body: hijack)
        #expect(anonymous.status == 403)
        #expect(anonymous.json["reason"] == "You may only update your own user document.")
        // In _bulk_docs each document gets its own answer.
        let bulk = try server.json("POST", "/_users/_bulk_docs", headers: [basicAuthorization("member", newPassword)],
                                   body: #"{"docs":[\#(hijack.replacingOccurrences(of: "{", with: #"{"_id":"org.couchdb.user:outsider","#))]}"#)
        #expect(bulk.status == 201)
        #expect(bulk.json[0]?["error"] == "not_found")
        #expect(try server.request("GET", "/", headers: fixture.credentials("outsider")).status == 200)

        // Deleting: one's own, not another's.
        #expect(try server.json("DELETE", "/_users/org.couchdb.user:outsider?rev=\(rev3)",
                                headers: [basicAuthorization("member", newPassword)]).status == 404)
        #expect(try server.json("DELETE", "/_users/org.couchdb.user:outsider?rev=\(rev3)",
                                headers: fixture.credentials("outsider")).status == 200)
    }

    @Test func onlyAdminsListTheUsersDatabase() throws {
        let fixture = try SecuredServer()
        for path in ["/_users/_all_docs", "/_users/_changes", "/_users/_design_docs"] {
            for who in ["anonymous", "member"] {
                let attempt = try fixture.attempt(who, "GET", path)
                #expect(attempt.status == 401, "\(who) \(path)")
                #expect(attempt.error == "unauthorized")
            }
            #expect(try fixture.attempt("admin", "GET", path).status == 200, "\(path)")
        }
        #expect(try fixture.attempt("member", "POST", "/_users/_all_docs", body: #"{"keys":["org.couchdb.user:outsider"]}"#).status == 401)
        // Its security object is not editable, as in CouchDB 3.
        let security = try fixture.attempt("admin", "PUT", "/_users/_security", body: "{}")
        #expect(security.status == 403)
    }

    @Test func adminsWriteDesignDocumentsOfTheUsersDatabase() throws {
        let fixture = try SecuredServer()
        let design = #"{"views":{"names":{"map":"function(doc){ if (doc.name) emit(doc.name, null); }"}}}"#
        // Not a user document: the `_users` rules do not apply to it, only the admin check.
        #expect(try fixture.attempt("admin", "PUT", "/_users/_design/lookup", body: design).status == 201)
        let refused = try fixture.attempt("member", "PUT", "/_users/_design/other", body: design)
        #expect(refused.status == 403 && refused.error == "forbidden")
        #expect(try fixture.attempt("admin", "GET", "/_users/_design/lookup").status == 200)
    }

    @Test func passwordsNeverReachTheDataDirectoryInClear() throws {
        let fixture = try SecuredServer()
        let server = fixture.server
        let password = "Cleartext-Canary-31337"
        #expect(try server.json("PUT", "/_users/org.couchdb.user:canary", body: Self.userJSON("canary", password: password)).status == 201)
        #expect(try server.request("POST", "/_session", body: #"{"name":"canary","password":"\#(password)"}"#).status == 200)
        #expect(try server.request("GET", "/secured", headers: [basicAuthorization("canary", password)]).status == 403)
        let files = allFileBytes(under: server.directory)
        #expect(files.count >= 4)
        for file in files {
            #expect(!contains(file.bytes, password), "\(file.path)")
            #expect(!contains(file.bytes, SecuredServer.adminPassword), "\(file.path)")
            #expect(!contains(file.bytes, SecuredServer.password(of: "member")), "\(file.path)")
        }
    }
}
