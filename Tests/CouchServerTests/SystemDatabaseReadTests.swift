import CouchCore
import CouchTestSupport
import Foundation
import Testing

/// What a non-admin reads of the system databases, over every read route: another user's
/// replication credentials never leave in any form (documents, `open_revs`, `_bulk_get`,
/// listings, changes, views, `_find`, show/list/update functions, copies), and no filter,
/// selector, index, statistic or error tells them apart; `_users` answers reveal no user
/// but one's own.
@Suite struct SystemDatabaseReadTests {
    static let secrets = ["SECRETPW1", "SECRETHDR2", "SECRETAUTH3", "SECRETURL4", "SECRETTOKEN5", "SECRETPROXY6", "SECRET@AT7"]
    static let replicationDocument = #"""
    {"source": "http://u:SECRETPW1@127.0.0.1:9/db",
     "target": {"url": "http://127.0.0.1:9/t", "headers": {"Authorization": "Basic SECRETHDR2"},
                "auth": {"basic": {"username": "u", "password": "SECRETAUTH3"}}},
     "suspended": true}
    """#
    /// Credentials CouchDB itself leaves in place: an object's `url`, a token as the URL's
    /// user, a proxy's URL, a password holding a raw `@`.
    static let otherReplicationDocument = #"""
    {"source": {"url": "http://u:SECRETURL4@127.0.0.1:9/db"}, "target": "https://SECRETTOKEN5@127.0.0.1:9/t",
     "proxy": "http://p:SECRETPROXY6@127.0.0.1:9", "source_proxy": "http://p:SECRET@AT7@127.0.0.1:9", "suspended": true}
    """#
    static let designDocument = #"""
    {"views": {"all": {"map": "function(doc) { emit(doc._id, null); }"}},
     "shows": {"doc": "function(doc, req) { return {body: JSON.stringify(doc)}; }"},
     "updates": {"echo": "function(doc, req) { return [null, JSON.stringify(doc)]; }"},
     "lists": {"docs": "function(head, req) { var row; while ((row = getRow())) { send(JSON.stringify(row.doc)); } }"},
     "filters": {"secret": "function(doc, req) { return !doc.views && JSON.stringify(doc).indexOf('SECRET') >= 0; }"}}
    """#

    /// A server whose replicator databases (`_replicator`, and `team/_replicator`, whose
    /// listings and changes members may read) hold the admin's document `secret`, with an
    /// attachment, and a design document of every function kind.
    static func replicatorFixture() throws -> SecuredServer {
        let fixture = try SecuredServer()
        let server = fixture.server
        #expect(try server.request("PUT", "/team%2F_replicator", headers: [fixture.admin]).status == 201)
        for database in ["_replicator", "team%2F_replicator"] {
            try fixture.setSecurity(database, #"{"admins": {}, "members": {}}"#)
            let created = try server.json("PUT", "/\(database)/secret", headers: [fixture.admin], body: Self.replicationDocument)
            #expect(created.status == 201, "\(created.json.serializedString())")
            let rev = try #require(created.json["rev"]?.stringValue)
            let attached = try server.request("PUT", "/\(database)/secret/note.txt?rev=\(rev)",
                                              headers: [fixture.admin, ("Content-Type", "text/plain")], body: "a note")
            #expect(attached.status == 201, "\(attached.text)")
            #expect(try server.request("PUT", "/\(database)/_design/d", headers: [fixture.admin],
                                       body: Self.designDocument).status == 201)
            let other = try server.request("PUT", "/\(database)/secret2", headers: [fixture.admin], body: Self.otherReplicationDocument)
            #expect(other.status == 201, "\(other.text)")
        }
        return fixture
    }

    static func leaks(_ bytes: [UInt8]) -> String? {
        secrets.first { contains(bytes, $0) }
    }

    @Test func anotherUsersReplicationCredentialsLeaveByNoReadRoute() throws {
        let fixture = try Self.replicatorFixture()
        let server = fixture.server
        let reader = fixture.credentials("outsider")
        let keys = "%5B%22secret%22%5D"
        var routes: [(String, String, [(String, String)], String?)] = []
        for database in ["_replicator", "team%2F_replicator"] {
            let json = [("Accept", "application/json")]
            routes += [
                ("GET", "/\(database)/secret", [], nil),
                ("GET", "/\(database)/secret?revs=true&revs_info=true&meta=true&local_seq=true", [], nil),
                ("GET", "/\(database)/secret?attachments=true", json, nil),
                ("GET", "/\(database)/secret?attachments=true", [("Accept", "multipart/related")], nil),
                ("GET", "/\(database)/secret?open_revs=all&revs=true", json, nil),
                ("GET", "/\(database)/secret?open_revs=all&attachments=true", [("Accept", "multipart/mixed")], nil),
                ("POST", "/\(database)/_bulk_get?revs=true", json, #"{"docs": [{"id": "secret"}]}"#),
                ("POST", "/\(database)/_bulk_get?revs=true&attachments=true", [("Accept", "multipart/mixed")],
                 #"{"docs": [{"id": "secret"}]}"#),
                ("POST", "/\(database)/_find", [], #"{"selector": {"_id": "secret"}, "execution_stats": true}"#),
                ("GET", "/\(database)/_design/d/_view/all?include_docs=true&attachments=true", [], nil),
                ("POST", "/\(database)/_design/d/_view/all?include_docs=true", [], #"{"keys": ["secret"]}"#),
                ("GET", "/\(database)/_design/d/_show/doc/secret", [], nil),
                ("POST", "/\(database)/_design/d/_update/echo/secret", [], "{}"),
                ("GET", "/\(database)/_design/d/_list/docs/all?include_docs=true", [], nil),
            ]
        }
        let team = "team%2F_replicator"
        routes += [
            ("GET", "/\(team)/_all_docs?include_docs=true&conflicts=true", [], nil),
            ("GET", "/\(team)/_all_docs?include_docs=true&keys=\(keys)", [], nil),
            ("POST", "/\(team)/_all_docs/queries", [], #"{"queries": [{"keys": ["secret"], "include_docs": true}]}"#),
            ("GET", "/\(team)/_changes?include_docs=true", [], nil),
            ("GET", "/\(team)/_changes?include_docs=true&attachments=true&style=all_docs", [], nil),
            ("GET", "/\(team)/_changes?include_docs=true&descending=true&conflicts=true", [], nil),
            ("GET", "/\(team)/_changes?feed=longpoll&include_docs=true&timeout=1000", [], nil),
            ("POST", "/\(team)/_changes?include_docs=true&filter=_doc_ids", [], #"{"doc_ids": ["secret"]}"#),
        ]
        for (method, path, headers, body) in routes {
            let response = try server.request(method, path, headers: reader + headers, body: body)
            #expect(response.status < 300, "\(method) \(path): \(response.status) \(response.text)")
            #expect(contains(response.body, "secret"), "\(method) \(path) answered without the document: \(response.text)")
            #expect(Self.leaks(response.body) == nil, "\(method) \(path) leaks: \(response.text)")
        }
        // The owner (here the admin) reads them: the routes above did answer the document.
        for database in ["_replicator", "team%2F_replicator"] {
            let own = try server.request("POST", "/\(database)/_bulk_get", headers: [fixture.admin],
                                         body: #"{"docs": [{"id": "secret"}, {"id": "secret2"}]}"#)
            #expect(Self.secrets.allSatisfy { contains(own.body, $0) })
        }
    }

    @Test func filtersSelectorsAndCopiesSeeNoHiddenCredential() throws {
        let fixture = try Self.replicatorFixture()
        let server = fixture.server
        let reader = fixture.credentials("outsider")
        let team = "team%2F_replicator"
        func changedIDs(_ path: String, body: String? = nil) throws -> [String] {
            let (status, json) = try server.json(body == nil ? "GET" : "POST", path, headers: reader, body: body)
            #expect(status == 200, "\(path): \(json.serializedString())")
            return (json["results"]?.arrayValue ?? []).compactMap { $0["id"]?.stringValue }
        }
        // A filter function and a selector judge the document as the reader sees it.
        #expect(try changedIDs("/\(team)/_changes?filter=d/secret").isEmpty)
        #expect(try changedIDs("/\(team)/_changes?filter=_selector", body: #"{"selector": {"source": {"$regex": "SECRET"}}}"#).isEmpty)
        #expect(try changedIDs("/\(team)/_changes?filter=_selector",
                               body: #"{"selector": {"target.auth.basic.password": {"$gt": null}}}"#).isEmpty)
        #expect(try changedIDs("/\(team)/_changes?filter=_selector", body: #"{"selector": {"_id": "secret"}}"#) == ["secret"])
        let asAdmin = try server.json("GET", "/\(team)/_changes?filter=d/secret", headers: [fixture.admin]).json
        #expect(asAdmin["results"]?.arrayValue?.count == 2, "the filter does see the credentials of an admin's reading")

        for database in ["_replicator", team] {
            for selector in [#"{"source": {"$regex": "SECRETPW"}}"#, #"{"target.headers.Authorization": {"$gt": null}}"#,
                             #"{"target.auth": {"$exists": true}}"#] {
                let found = try server.json("POST", "/\(database)/_find", headers: reader, body: #"{"selector": \#(selector)}"#)
                #expect(found.status == 200)
                #expect(found.json["docs"] == [], "\(database) \(selector): \(found.json.serializedString())")
            }
            // A copy is made of what the reader may read, if the rules let it be made at all.
            let copied = try server.request("COPY", "/\(database)/secret", headers: reader + [("Destination", "stolen")])
            let stolen = try server.request("GET", "/\(database)/stolen", headers: [fixture.admin])
            #expect(copied.status == 201 || stolen.status == 404, "\(copied.status) \(copied.text)")
            #expect(Self.leaks(stolen.body) == nil)
        }
    }

    @Test func indexesOfReplicationDocumentsAnswerNothingDerivedFromCredentials() throws {
        let fixture = try Self.replicatorFixture()
        let server = fixture.server
        let reader = fixture.credentials("outsider")
        for fields in [#"["source"]"#, #"["target.headers.Authorization"]"#] {
            #expect(try server.request("POST", "/_replicator/_index", headers: [fixture.admin],
                                       body: #"{"index": {"fields": \#(fields)}}"#).status == 200)
        }
        // The stripped URL matches `$gt`; a bookmark made of the index key would carry the password.
        let query = #"{"selector": {"source": {"$gt": "http"}}, "execution_stats": true}"#
        let found = try server.json("POST", "/_replicator/_find", headers: reader, body: query)
        #expect(found.status == 200)
        #expect(found.json["docs"]?[0]?["_id"] == "secret")
        let bookmark = try #require(found.json["bookmark"]?.stringValue)
        var base64 = bookmark.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while base64.count % 4 != 0 { base64 += "=" }
        let decoded = try #require(Data(base64Encoded: base64))
        #expect(Self.leaks(Array(decoded)) == nil, "\(String(decoding: decoded, as: UTF8.self))")
        let explained = try server.json("POST", "/_replicator/_explain", headers: reader, body: query).json
        #expect(explained["index"]?["name"] == "_all_docs")
        #expect(explained["index_candidates"] == [])
        // A range over a hidden field counts nothing hidden: the same answer for any bound.
        var statistics: Set<String> = []
        for bound in ["Basic A", "Basic S", "Basic Z"] {
            let probe = try server.json("POST", "/_replicator/_find", headers: reader,
                                        body: #"{"selector": {"target.headers.Authorization": {"$gt": "\#(bound)"}}, "execution_stats": true}"#)
            #expect(probe.json["docs"] == [])
            let stats = try #require(probe.json["execution_stats"])
            statistics.insert("\(stats["total_keys_examined"]?.serializedString() ?? "")/\(stats["total_docs_examined"]?.serializedString() ?? "")")
        }
        #expect(statistics.count == 1, "\(statistics)")
        // An admin's query still uses the index.
        let asAdmin = try server.json("POST", "/_replicator/_explain", headers: [fixture.admin], body: query).json
        #expect(asAdmin["index"]?["type"] == "json")
    }

    @Test func designDocumentListingsListOnlyDesignDocuments() throws {
        let fixture = try Self.replicatorFixture()
        let server = fixture.server
        for database in ["_replicator", "team%2F_replicator"] {
            let listed = try server.json("GET", "/\(database)/_design_docs?include_docs=true&keys=%5B%22secret%22,%22_design/d%22%5D",
                                         headers: [fixture.admin]).json
            #expect((listed["rows"]?.arrayValue ?? []).compactMap { $0["key"]?.stringValue } == ["_design/d"],
                    "\(listed.serializedString())")
            let queried = try server.json("POST", "/\(database)/_design_docs/queries", headers: [fixture.admin],
                                          body: #"{"queries": [{"keys": ["secret", "_design/d"]}]}"#).json
            #expect((queried["results"]?[0]?["rows"]?.arrayValue ?? []).compactMap { $0["key"]?.stringValue } == ["_design/d"])
        }
    }

    // MARK: _users

    @Test func usersQueriesRevealNoOtherUser() throws {
        let fixture = try SecuredServer()
        let server = fixture.server
        let reader = fixture.credentials("outsider")
        #expect(try server.request("POST", "/_users/_index", headers: [fixture.admin],
                                   body: #"{"index": {"fields": ["name"]}, "ddoc": "by-name", "name": "by-name"}"#).status == 200)
        func find(_ body: String) throws -> JSONValue {
            let (status, json) = try server.json("POST", "/_users/_find", headers: reader, body: body)
            #expect(status == 200, "\(body): \(json.serializedString())")
            return json
        }
        func statistics(_ json: JSONValue) -> String {
            let stats = json["execution_stats"]
            return ["total_keys_examined", "total_docs_examined", "results_returned"]
                .map { stats?[$0]?.serializedString() ?? "-" }.joined(separator: "/")
        }
        // Another user and nobody look the same; one's own document is found.
        let other = try find(#"{"selector": {"_id": "org.couchdb.user:member"}, "execution_stats": true}"#)
        let nobody = try find(#"{"selector": {"_id": "org.couchdb.user:nobody"}, "execution_stats": true}"#)
        #expect(statistics(other) == "0/0/0")
        #expect(statistics(nobody) == statistics(other))
        #expect(other["warning"] == nobody["warning"])
        let own = try find(#"{"selector": {"_id": "org.couchdb.user:outsider"}, "execution_stats": true}"#)
        #expect(statistics(own) == "1/1/1")
        let everyone = try find(#"{"selector": {"type": "user"}, "execution_stats": true}"#)
        #expect(statistics(everyone) == "1/1/1", "\(everyone.serializedString())")
        let byName = try find(#"{"selector": {"name": {"$gt": "m"}}, "execution_stats": true, "use_index": "by-name"}"#)
        let byMissingIndex = try find(#"{"selector": {"name": {"$gt": "m"}}, "execution_stats": true, "use_index": "no-such"}"#)
        #expect(statistics(byName) == "1/1/1")
        #expect(byName["warning"]?.stringValue?.replacingOccurrences(of: "by-name", with: "no-such") == byMissingIndex["warning"]?.stringValue)
        let explained = try server.json("POST", "/_users/_explain", headers: reader, body: #"{"selector": {"name": "member"}}"#).json
        #expect(explained["index"]?["name"] == "_all_docs")
        #expect(!explained.serializedString().contains("by-name"))

        // Design documents, indexes and what they derive from every user are for admins.
        for (method, path) in [("GET", "/_users/_design/by-name/_view/by-name"), ("GET", "/_users/_design/by-name/_info"),
                               ("GET", "/_users/_index"), ("GET", "/_users/_purged_infos"),
                               ("GET", "/_users/_design/_auth")] {
            let response = try server.request(method, path, headers: reader)
            #expect(response.status == 401 || response.status == 403, "\(method) \(path): \(response.status) \(response.text)")
            #expect(!contains(response.body, "member"), "\(method) \(path): \(response.text)")
        }
        #expect(try server.request("GET", "/_users/_index", headers: [fixture.admin]).status == 200)
    }
}
