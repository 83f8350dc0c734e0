import CouchCore
@testable import CouchServer
import CouchTestSupport
import Foundation
import Testing

@Suite struct SecurityTests {
    /// Who is asked, in this order (admin last: some of its requests change things).
    static let people = ["anonymous", "outsider", "member", "teammate", "dbadmin", "admin"]

    struct Rule: Sendable {
        let method: String
        let path: @Sendable (String) -> String
        let body: String?
        /// Expected status per person, in `people` order.
        let expected: [Int]
    }

    static func rule(_ method: String, _ path: String, body: String? = nil, _ expected: [Int]) -> Rule {
        Rule(method: method, path: { _ in path }, body: body, expected: expected)
    }

    static func rule(_ method: String, _ path: @escaping @Sendable (String) -> String, body: String? = nil, _ expected: [Int]) -> Rule {
        Rule(method: method, path: path, body: body, expected: expected)
    }

    /// One rule per route family, after CouchDB 3: members read and write documents,
    /// database admins also design documents and the security object, server admins
    /// everything, including creating and deleting databases.
    static let rules: [Rule] = [
        rule("GET", "/", [200, 200, 200, 200, 200, 200]),
        rule("GET", "/_up", [200, 200, 200, 200, 200, 200]),
        rule("GET", "/_uuids", [200, 200, 200, 200, 200, 200]),
        rule("GET", "/_session", [200, 200, 200, 200, 200, 200]),
        rule("GET", "/_all_dbs", [401, 401, 401, 401, 401, 200]),
        rule("GET", "/secured", [401, 403, 200, 200, 200, 200]),
        rule("PUT", { "/db-\($0)" }, [401, 401, 401, 401, 401, 201]),
        rule("DELETE", "/doomed", [401, 401, 401, 401, 401, 200]),
        rule("PUT", { "/secured/doc-\($0)" }, body: #"{"a":1}"#, [401, 403, 201, 201, 201, 201]),
        rule("POST", "/secured", body: #"{"b":2}"#, [401, 403, 201, 201, 201, 201]),
        rule("GET", "/secured/existing", [401, 403, 200, 200, 200, 200]),
        rule("PUT", { "/secured/_design/dd-\($0)" }, body: "{}", [401, 403, 403, 403, 201, 201]),
        rule("GET", "/secured/_design/existing", [401, 403, 200, 200, 200, 200]),
        rule("PUT", { "/secured/_local/l-\($0)" }, body: "{}", [401, 403, 201, 201, 201, 201]),
        rule("GET", "/secured/_all_docs", [401, 403, 200, 200, 200, 200]),
        rule("GET", "/secured/_design_docs", [401, 403, 200, 200, 200, 200]),
        rule("GET", "/secured/_changes", [401, 403, 200, 200, 200, 200]),
        rule("POST", "/secured/_bulk_docs", body: #"{"docs":[{"c":3}]}"#, [401, 403, 201, 201, 201, 201]),
        rule("POST", "/secured/_bulk_get", body: #"{"docs":[{"id":"existing"}]}"#, [401, 403, 200, 200, 200, 200]),
        rule("POST", "/secured/_revs_diff", body: #"{"existing":["1-abc"]}"#, [401, 403, 200, 200, 200, 200]),
        rule("GET", "/secured/_security", [401, 403, 200, 200, 200, 200]),
        rule("PUT", "/secured/_security", body: SecuredServer.securityObject, [401, 403, 403, 403, 200, 200]),
        rule("GET", "/secured/_revs_limit", [401, 403, 200, 200, 200, 200]),
        rule("PUT", "/secured/_revs_limit", body: "1000", [401, 403, 403, 403, 200, 200]),
        // CouchDB answers 401 "You are not a server or db admin." even to members.
        rule("POST", "/secured/_compact", body: "{}", [401, 403, 401, 401, 202, 202]),
        rule("POST", "/secured/_ensure_full_commit", body: "{}", [401, 403, 201, 201, 201, 201]),
    ]

    @Test func eachRouteFamilyForEachKindOfUser() throws {
        let fixture = try SecuredServer()
        let server = fixture.server
        #expect(try server.request("PUT", "/secured/existing", headers: [fixture.admin], body: "{}").status == 201)
        #expect(try server.request("PUT", "/secured/_design/existing", headers: [fixture.admin], body: "{}").status == 201)
        #expect(try server.request("PUT", "/doomed", headers: [fixture.admin]).status == 201)
        try fixture.setSecurity("doomed", SecuredServer.securityObject)
        for rule in Self.rules {
            for (who, expected) in zip(Self.people, rule.expected) {
                let path = rule.path(who)
                let (status, error) = try fixture.attempt(who, rule.method, path, body: rule.body)
                #expect(status == expected, "\(who) \(rule.method) \(path)")
                if status == 401 { #expect(error == "unauthorized", "\(who) \(rule.method) \(path)") }
                if status == 403 { #expect(error == "forbidden", "\(who) \(rule.method) \(path)") }
            }
        }
    }

    @Test func refusalsHaveCouchDBsReasons() throws {
        let fixture = try SecuredServer()
        let server = fixture.server
        func reason(_ who: String, _ method: String, _ path: String, body: String? = nil) throws -> JSONValue? {
            try server.json(method, path, headers: fixture.credentials(who), body: body).json["reason"]
        }
        #expect(try reason("anonymous", "GET", "/secured") == "You are not authorized to access this db.")
        #expect(try reason("outsider", "GET", "/secured") == "You are not allowed to access this db.")
        #expect(try reason("member", "PUT", "/secured/_security", body: "{}") == "You are not a db or server admin.")
        #expect(try reason("member", "PUT", "/secured/_design/x", body: "{}") == "You are not a db or server admin.")
        #expect(try reason("member", "PUT", "/other") == "You are not a server admin.")
        #expect(try reason("member", "POST", "/secured/_compact", body: "{}") == "You are not a server or db admin.")
        // A database that does not exist is a 404 before any security check, as in CouchDB.
        #expect(try server.json("GET", "/missing").status == 404)
    }

    @Test func designDocumentsInBulkAreRefusedOneByOne() throws {
        let fixture = try SecuredServer()
        let (status, results) = try fixture.server.json(
            "POST", "/secured/_bulk_docs", headers: fixture.credentials("member"),
            body: #"{"docs":[{"_id":"plain"},{"_id":"_design/sneaky","views":{}}]}"#)
        #expect(status == 201)
        #expect(results[0]?["ok"] == true)
        #expect(results[1] == ["id": "_design/sneaky", "error": "forbidden", "reason": "You are not a db or server admin."])
        // POST /db and COPY carry their IDs elsewhere than the URL; the same rule holds.
        let post = try fixture.attempt("member", "POST", "/secured", body: #"{"_id":"_design/viaPost"}"#)
        #expect(post.status == 403)
        let copy = try fixture.attempt("member", "COPY", "/secured/plain", headers: [("Destination", "_design/viaCopy")])
        #expect(copy.status == 403)
        #expect(try fixture.attempt("dbadmin", "COPY", "/secured/plain", headers: [("Destination", "_design/viaCopy")]).status == 201)
    }

    @Test func newDatabasesAreAdminOnlyUntilTheirSecuritySaysOtherwise() throws {
        let fixture = try SecuredServer()
        #expect(try fixture.server.request("PUT", "/fresh", headers: [fixture.admin]).status == 201)
        #expect(try fixture.server.json("GET", "/fresh/_security", headers: [fixture.admin]).json
                == ["members": ["roles": ["_admin"]], "admins": ["roles": ["_admin"]]])
        #expect(try fixture.attempt("member", "GET", "/fresh").status == 403)
        #expect(try fixture.attempt("anonymous", "GET", "/fresh").status == 401)
        try fixture.setSecurity("fresh", "{}")
        #expect(try fixture.attempt("anonymous", "GET", "/fresh").status == 200)
        #expect(try fixture.attempt("outsider", "PUT", "/fresh/doc", body: "{}").status == 201)
        #expect(try fixture.attempt("outsider", "PUT", "/fresh/_design/d", body: "{}").status == 403)

        let open = try SecuredServer { $0.authentication.defaultSecurity = .everyone }
        #expect(try open.server.request("PUT", "/fresh", headers: [open.admin]).status == 201)
        #expect(try open.attempt("anonymous", "GET", "/fresh").status == 200)
        #expect(try open.server.json("GET", "/fresh/_security", headers: [open.admin]).json == [:])
    }

    /// `[couchdb] default_security` as CouchDB 3 reads it: written into a database when it is
    /// created, so a later change of the setting leaves existing databases as they were.
    @Test func defaultSecurityIsFixedAtCreation() throws {
        var adminOnly = ServerConfiguration.testing(admins: ["admin": "pw"])
        try adminOnly.apply(ConfigurationFile(text: "[couchdb]\ndefault_security = admin_only\n"))
        let directory = TestServer.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let admin = basicAuthorization("admin", "pw")
        let first = try TestServer(directory: directory, configuration: adminOnly)
        #expect(try first.request("PUT", "/before", headers: [admin]).status == 201)
        let replication = try first.json("POST", "/_replicate", headers: [admin],
                                         body: #"{"source":"before","target":"made","create_target":true}"#)
        #expect(replication.json["ok"] == true, "\(replication.json.serializedString())")
        first.stop(keepData: true)

        var everyone = ServerConfiguration.testing(admins: ["admin": "pw"])
        try everyone.apply(ConfigurationFile(text: "[couchdb]\ndefault_security = admin_local\n"))
        let second = try TestServer(directory: directory, configuration: everyone)
        defer { second.stop() }
        #expect(try second.request("PUT", "/after", headers: [admin]).status == 201)
        #expect(try second.request("GET", "/before").status == 401)
        #expect(try second.request("GET", "/made").status == 401, "create_target wrote the default too")
        #expect(try second.json("GET", "/before/_security", headers: [admin]).json
                == ["members": ["roles": ["_admin"]], "admins": ["roles": ["_admin"]]])
        #expect(try second.request("GET", "/after").status == 200)
        #expect(try second.json("GET", "/after/_security", headers: [admin]).json == [:])
        var bogus = ServerConfiguration()
        #expect(throws: ConfigurationError.self) {
            try bogus.apply(ConfigurationFile(text: "[couchdb]\ndefault_security = nobody\n"))
        }
    }

    @Test func securityObjectsAreValidatedAndRoundTrip() throws {
        let fixture = try SecuredServer()
        // CouchDB 3 answers 500 `error` (every shard refused the object).
        for body in [#"[]"#, #"{"admins":[]}"#, #"{"members":{"names":"bob"}}"#, #"{"members":{"roles":[1]}}"#] {
            #expect(try fixture.attempt("admin", "PUT", "/secured/_security", body: body) == (500, "error"), "\(body)")
        }
        let custom = #"{"admins":{"names":[],"roles":["boss"]},"members":{"names":["outsider"],"roles":[]},"note":"kept"}"#
        try fixture.setSecurity("secured", custom)
        #expect(try fixture.server.json("GET", "/secured/_security", headers: [fixture.admin]).json == (try JSONValue.parse(custom)))
        #expect(try fixture.attempt("outsider", "GET", "/secured").status == 200)
        #expect(try fixture.attempt("member", "GET", "/secured").status == 403)
        #expect(try fixture.attempt("dbadmin", "PUT", "/secured/_design/d", body: "{}").status == 403)
    }

    // MARK: The route walk

    /// A path for each route of the table in the database `secured`; nil for server-level
    /// routes. A switch without `default`: a new route makes this test say where it goes.
    static func samplePath(_ route: RouteKey) -> String? {
        switch route {
        case .server(let resource):
            switch resource {
            case .root, .allDatabases, .uuids, .up, .session, .replicate, .activeTasks, .membership,
                 .databasesInfo, .databaseUpdates, .legacyStats, .legacyConfig: return nil
            }
        case .node: return nil
        case .database: return "/secured"
        case .databaseResource(let resource): return "/secured/" + resource.rawValue
        case .document: return "/secured/walk-doc"
        case .localDocument: return "/secured/_local/walk"
        case .attachment: return "/secured/walk-doc/file.txt"
        case .designResource: return "/secured/_design/walk/_view/v"
        case .designFunction(let function): return "/secured/_design/walk/" + function.rawValue + "/f"
        case .index: return "/secured/_index/walk/json/name"
        case .partition: return "/secured/_partition/walk/_all_docs"
        // Server-level: admin-only whatever the database's `_security`.
        case .scheduler, .reshard: return nil
        // The admin page's files are public (tested in StaticFilesTests).
        case .utils: return nil
        }
    }

    /// Every route the router knows, every method it serves, against a database whose
    /// `_security` has members: anonymous gets 401 and a valid user who is not a member 403
    /// (401 where CouchDB requires a server admin: creating or deleting the database).
    @Test func everyRouteEnforcesTheDatabaseSecurity() throws {
        let fixture = try SecuredServer()
        var walked = 0
        var adminRequests: [(String, String)] = []
        for (route, handlers) in RouteTable.routes {
            guard let path = Self.samplePath(route) else { continue }
            var methods = Array(handlers.keys)
            if handlers[.GET] != nil, handlers[.HEAD] == nil { methods.append(.HEAD) }
            for method in methods {
                let body: String? = method == .PUT || method == .POST ? (route == .databaseResource(.revisionsLimit) ? "5" : "{}") : nil
                let headers = method == .COPY ? [("Destination", "walk-copy")] : []
                let anonymous = try fixture.attempt("anonymous", method.rawValue, path, body: body, headers: headers)
                #expect(anonymous.status == 401, "anonymous \(method) \(path)")
                if method != .HEAD { #expect(anonymous.error == "unauthorized", "anonymous \(method) \(path)") }

                let serverAdminOnly = route == .database && (method == .PUT || method == .DELETE)
                let outsider = try fixture.attempt("outsider", method.rawValue, path, body: body, headers: headers)
                #expect(outsider.status == (serverAdminOnly ? 401 : 403), "outsider \(method) \(path)")
                if method != .HEAD { #expect(outsider.error == (serverAdminOnly ? "unauthorized" : "forbidden"), "outsider \(method) \(path)") }
                walked += 1
                if !(route == .database && method == .DELETE) { adminRequests.append((method.rawValue, path)) }
            }
        }
        #expect(walked >= 30)
        // The walk is not vacuous: a server admin gets through every one of those routes.
        for (method, path) in adminRequests {
            let body: String? = method == "PUT" || method == "POST" ? (path.hasSuffix("_revs_limit") ? "5" : "{}") : nil
            let admin = try fixture.attempt("admin", method, path, body: body,
                                            headers: method == "COPY" ? [("Destination", "walk-copy")] : [])
            #expect(admin.status != 401 && admin.status != 403, "admin \(method) \(path): \(admin.status)")
        }
    }
}
