import CouchCore
import CouchTestSupport
import Foundation
import Testing

/// `_purge`, `_purged_infos_limit`, `_purged_infos`.
@Suite struct PurgeTests {
    static let revA = "1-" + String(repeating: "a", count: 32)
    static let revB = "1-" + String(repeating: "b", count: 32)

    private func conflicted(_ server: TestServer, _ id: String) throws {
        let body = #"{"new_edits":false,"docs":[{"_id":"\#(id)","_rev":"\#(Self.revA)","v":"a"},{"_id":"\#(id)","_rev":"\#(Self.revB)","v":"b"}]}"#
        #expect(try server.request("POST", "/db/_bulk_docs", body: body).status == 201)
    }

    @Test func purgingALeafRemovesItFromTreeBodiesAndFeeds() throws {
        let server = try TestServer()
        defer { server.stop() }
        try server.createDatabase("db")
        let first = try server.put("db", "gone", #"{"n":1}"#)
        let second = try server.put("db", "gone", #"{"_rev":"\#(first)","n":2}"#)
        try conflicted(server, "kept")
        #expect(try server.json("GET", "/db/kept?conflicts=true").json["_conflicts"] == [JSONValue(Self.revA)])

        let (status, answer) = try server.json("POST", "/db/_purge",
                                               body: #"{"gone":["\#(second)","\#(first)"],"kept":["\#(Self.revB)"],"nothing":["\#(Self.revA)"]}"#)
        #expect(status == 201)
        #expect(answer["purge_seq"] == .null)
        // Only leaves are purged: `first` was not one (CouchDB ignores it too).
        #expect(answer["purged"]?["gone"] == [JSONValue(second)])
        #expect(answer["purged"]?["kept"] == [JSONValue(Self.revB)])
        #expect(answer["purged"]?["nothing"] == [])

        // A document with no revision left is gone, as if never written.
        #expect(try server.request("GET", "/db/gone").status == 404)
        #expect(try server.request("GET", "/db/gone?rev=\(first)").status == 404)
        let kept = try server.json("GET", "/db/kept?conflicts=true").json
        #expect(kept["_rev"] == JSONValue(Self.revA))
        #expect(kept["_conflicts"] == nil)
        #expect(try server.request("GET", "/db/kept?rev=\(Self.revB)").status == 404)
        let allDocs = try server.json("GET", "/db/_all_docs").json["rows"]?.arrayValue?.compactMap { $0["id"]?.stringValue }
        #expect(allDocs == ["kept"])
        let changes = try server.json("GET", "/db/_changes?style=all_docs").json
        let rows = try #require(changes["results"]?.arrayValue)
        #expect(rows.compactMap { $0["id"]?.stringValue } == ["kept"])
        #expect(rows.first?["changes"] == [["rev": JSONValue(Self.revA)]])

        let info = try server.json("GET", "/db").json
        #expect(sequenceNumber(info["purge_seq"]) == 2)
        #expect(info["doc_count"] == 1)
        let infos = try #require(try server.json("GET", "/db/_purged_infos").json["purged_infos"]?.arrayValue)
        #expect(infos.map { $0["id"]?.stringValue } == ["gone", "kept"])
        #expect(infos[0]["revs"] == [JSONValue(second)])
    }

    /// A purged design document takes what it defined with it, though its functions and
    /// indexes were read (and kept) before: its view, its filter and its Mango index.
    @Test func aPurgedDesignDocumentTakesItsFunctionsAndIndexes() throws {
        let server = try TestServer()
        defer { server.stop() }
        try server.createDatabase("db")
        try server.put("db", "d", #"{"n":1}"#)
        let functions = try server.put("db", "_design/f", #"""
            {"views":{"v":{"map":"function (doc) { emit(doc.n); }"}},"filters":{"f":"function (doc) { return true; }"}}
            """#)
        #expect(try server.json("POST", "/db/_index", body: #"{"index":{"fields":["n"]},"ddoc":"m","name":"by-n"}"#).status == 200)
        let mango = try #require(try server.json("GET", "/db/_design/m").json["_rev"]?.stringValue)
        #expect(try server.json("GET", "/db/_design/f/_view/v").json["rows"]?.arrayValue?.count == 1)
        #expect(try server.request("GET", "/db/_changes?filter=f/f").status == 200)
        #expect(try server.json("POST", "/db/_explain", body: #"{"selector":{"n":1}}"#).json["index"]?["name"] == "by-n")
        #expect(try server.json("GET", "/db/_index").json["total_rows"] == 2)

        #expect(try server.request("POST", "/db/_purge", body: #"{"_design/f":["\#(functions)"],"_design/m":["\#(mango)"]}"#).status == 201)
        #expect(try server.request("GET", "/db/_design/f/_view/v").status == 404)
        #expect(try server.request("GET", "/db/_changes?filter=f/f").status == 404)
        #expect(try server.json("GET", "/db/_index").json["total_rows"] == 1)
        #expect(try server.json("POST", "/db/_explain", body: #"{"selector":{"n":1}}"#).json["index"]?["name"] == "_all_docs")
    }

    @Test func purgedRevisionsAreNotReplicated() throws {
        let server = try TestServer()
        defer { server.stop() }
        try server.createDatabase("db")
        try conflicted(server, "doc")
        #expect(try server.json("POST", "/db/_purge", body: #"{"doc":["\#(Self.revB)"]}"#).status == 201)
        let replication = try server.json("POST", "/_replicate", body: #"{"source":"db","target":"copy","create_target":true}"#)
        #expect(replication.status == 200)
        let copied = try server.json("GET", "/copy/doc?open_revs=all").json
        #expect(copied.arrayValue?.compactMap { $0["ok"]?["_rev"]?.stringValue } == [Self.revA])
    }

    @Test func purgedInfosLimitAndBadRequests() throws {
        let server = try TestServer()
        defer { server.stop() }
        try server.createDatabase("db")
        #expect(try server.json("GET", "/db/_purged_infos_limit").json == 1000)
        #expect(try server.json("PUT", "/db/_purged_infos_limit", body: "1").json == ["ok": true])
        #expect(try server.json("GET", "/db/_purged_infos_limit").json == 1)
        #expect(try server.json("PUT", "/db/_purged_infos_limit", body: "0").status == 400)
        for id in ["x", "y"] {
            let rev = try server.put("db", id, "{}")
            #expect(try server.json("POST", "/db/_purge", body: #"{"\#(id)":["\#(rev)"]}"#).status == 201)
        }
        let infos = try #require(try server.json("GET", "/db/_purged_infos").json["purged_infos"]?.arrayValue)
        #expect(infos.map { $0["id"]?.stringValue } == ["y"])
        #expect(sequenceNumber(try server.json("GET", "/db").json["purge_seq"]) == 2)

        #expect(try server.json("POST", "/db/_purge", body: #"{"x":"1-abc"}"#).status == 400)
        #expect(try server.json("POST", "/db/_purge", body: #"{"x":["not-a-rev"]}"#).json["reason"] == "Invalid rev format")
        #expect(try server.json("POST", "/db/_purge", body: "[]").status == 400)
        let many = "{" + (0...100).map { #""d\#($0)":[]"# }.joined(separator: ",") + "}"
        #expect(try server.json("POST", "/db/_purge", body: many).json["reason"] == "Exceeded maximum number of documents.")
        #expect(try server.request("GET", "/db/_purge").status == 405)
    }
}
