import CouchCore
import CouchTestSupport
import Foundation
import Testing

/// Couchette's text indexes (SQLite FTS5) and `_find` on the system databases.
@Suite struct MangoTextAndSystemTests {
    static let articles: [(String, String)] = [
        ("a1", #"{"title": "The quick brown fox", "body": {"text": "jumps over the lazy dog"}, "year": 2001}"#),
        ("a2", #"{"title": "Fox hunting", "body": {"text": "a fox, another fox, and the quick fox again"}, "year": 1999}"#),
        ("a3", #"{"title": "Slow turtles", "body": {"text": "nothing quick here"}, "year": 2010}"#),
        ("a4", #"{"title": "Café culture", "body": {"text": "Crème brûlée and coffee"}, "year": 2015, "tags": ["food"]}"#),
        ("a5", #"{"title": "Untitled", "year": 2020}"#),
    ]

    @Test func textIndexesFindWordsInNestedFieldsAndRank() throws {
        let server = try TestServer()
        defer { server.stop() }
        try server.createDatabase("db")
        for (id, body) in Self.articles { try server.put("db", id, body) }
        #expect(try server.json("POST", "/db/_find", body: #"{"selector": {"$text": "fox"}}"#).json
                == ["error": "no_usable_index", "reason": "There is no index available for this selector."])
        let created = try server.json("POST", "/db/_index", body: #"""
            {"index": {"fields": [{"name": "title", "type": "string"}, {"name": "body.text", "type": "string"}]},
             "type": "text", "name": "articles", "ddoc": "search"}
            """#)
        #expect(created.json == ["result": "created", "id": "_design/search", "name": "articles"])
        let ddoc = try server.json("GET", "/db/_design/search").json
        #expect(ddoc["language"] == "query")
        #expect(ddoc["indexes"]?["articles"]?["index"]?["fields"] == [["name": "title", "type": "string"],
                                                                        ["name": "body.text", "type": "string"]])
        #expect(ddoc["indexes"]?["articles"]?["analyzer"]?["name"] == "perfield")
        let listed = try server.json("GET", "/db/_index").json["indexes"]?.arrayValue?.last
        #expect(listed?["type"] == "text")
        #expect(listed?["def"]?["fields"] == [["title": "string"], ["body.text": "string"]])

        func ids(_ body: String) throws -> [String] {
            let (status, json) = try server.json("POST", "/db/_find", body: body)
            #expect(status == 200, "\(body): \(json.serializedString())")
            return (json["docs"]?.arrayValue ?? []).compactMap { $0["_id"]?.stringValue }
        }
        // Relevance: the article saying "fox" four times comes first; the nested body is searched.
        #expect(try ids(#"{"selector": {"$text": "fox"}}"#) == ["a2", "a1"])
        #expect(try ids(#"{"selector": {"$text": "lazy"}}"#) == ["a1"])
        #expect(Set(try ids(#"{"selector": {"$text": "quick"}}"#)) == ["a1", "a2", "a3"])
        // Any word may match; accents and case do not matter; phrases, exclusions, prefixes.
        #expect(Set(try ids(#"{"selector": {"$text": "turtles coffee"}}"#)) == ["a3", "a4"])
        #expect(try ids(#"{"selector": {"$text": "CREME brulee"}}"#) == ["a4"])
        #expect(try ids(#"{"selector": {"$text": "\"brown fox\""}}"#) == ["a1"])
        #expect(Set(try ids(#"{"selector": {"$text": "quick -fox"}}"#)) == ["a3"])
        #expect(try ids(#"{"selector": {"$text": "turt*"}}"#) == ["a3"])
        // The rest of the selector applies to what the text search finds.
        #expect(try ids(#"{"selector": {"$text": "fox", "year": {"$gt": 2000}}}"#) == ["a1"])
        #expect(try ids(#"{"selector": {"$text": "quick"}, "fields": ["title"], "limit": 1}"#).isEmpty)
        let page = try server.json("POST", "/db/_find", body: #"{"selector": {"$text": "quick"}, "limit": 2}"#).json
        let bookmark = try #require(page["bookmark"]?.stringValue)
        let next = try ids(#"{"selector": {"$text": "quick"}, "limit": 2, "bookmark": "\#(bookmark)"}"#)
        #expect(next.count == 1)
        #expect(Set((page["docs"]?.arrayValue ?? []).compactMap { $0["_id"]?.stringValue } + next) == ["a1", "a2", "a3"])
        let explained = try server.json("POST", "/db/_explain", body: #"{"selector": {"$text": "fox"}}"#).json
        #expect(explained["index"]?["name"] == "articles" && explained["index"]?["type"] == "text")
        #expect(try server.json("POST", "/db/_find", body: #"{"selector": {"$or": [{"$text": "fox"}, {"year": 1}]}}"#).status == 400)

        // Later writes and deletions are indexed before the next query.
        let rev = try server.put("db", "a6", #"{"title": "Arctic fox", "year": 2021}"#)
        #expect(Set(try ids(#"{"selector": {"$text": "fox"}}"#)) == ["a1", "a2", "a6"])
        try server.request("DELETE", "/db/a6?rev=\(rev)")
        #expect(Set(try ids(#"{"selector": {"$text": "fox"}}"#)) == ["a1", "a2"])
        #expect(try server.json("DELETE", "/db/_index/search/text/articles").json == ["ok": true])
        #expect(try server.json("POST", "/db/_find", body: #"{"selector": {"$text": "fox"}}"#).status == 400)
    }

    @Test func textIndexOfAllFields() throws {
        let server = try TestServer()
        defer { server.stop() }
        try server.createDatabase("db")
        for (id, body) in Self.articles { try server.put("db", id, body) }
        #expect(try server.json("POST", "/db/_index", body: #"{"index": {}, "type": "text"}"#).status == 200)
        let found = try server.json("POST", "/db/_find", body: #"{"selector": {"$text": "food"}}"#).json
        #expect((found["docs"]?.arrayValue ?? []).compactMap { $0["_id"]?.stringValue } == ["a4"])
    }

    @Test func usersAndReplicatorFollowTheirReadRules() throws {
        let fixture = try SecuredServer()
        let server = fixture.server
        // A user finds only their own user document; an admin finds every one.
        let own = try server.json("POST", "/_users/_find", headers: fixture.credentials("member"),
                                  body: #"{"selector": {"type": "user"}}"#)
        #expect(own.status == 200)
        #expect((own.json["docs"]?.arrayValue ?? []).compactMap { $0["_id"]?.stringValue } == ["org.couchdb.user:member"])
        let all = try server.json("POST", "/_users/_find", headers: [fixture.admin], body: #"{"selector": {"type": "user"}}"#)
        #expect((all.json["docs"]?.arrayValue ?? []).count == 4)
        #expect(try server.json("POST", "/_users/_find", body: #"{"selector": {}}"#).json["docs"] == [])
        #expect(try server.json("POST", "/_users/_index", headers: fixture.credentials("member"),
                                body: #"{"index": {"fields": ["name"]}}"#).status == 403)

        // Another's replication document is read without its credentials.
        try fixture.setSecurity("_replicator", #"{"members": {"names": ["member"], "roles": []}}"#)
        let body = #"{"source": "http://bob:s3cret@127.0.0.1:9/a", "target": "http://127.0.0.1:9/b", "suspended": true}"#
        #expect(try server.request("PUT", "/_replicator/r1", headers: [fixture.admin], body: body).status == 201)
        let asAdmin = try server.json("POST", "/_replicator/_find", headers: [fixture.admin], body: #"{"selector": {}}"#)
        #expect(asAdmin.json["docs"]?[0]?["source"] == "http://bob:s3cret@127.0.0.1:9/a")
        let asUser = try server.json("POST", "/_replicator/_find", headers: fixture.credentials("member"),
                                     body: #"{"selector": {}}"#)
        #expect(asUser.status == 200)
        #expect(asUser.json["docs"]?[0]?["_id"] == "r1")
        #expect(!asUser.json.serializedString().contains("s3cret"))
    }
}
