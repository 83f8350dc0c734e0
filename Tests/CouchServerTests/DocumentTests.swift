import CouchCore
import CouchTestSupport
import Foundation
import Testing

@Suite struct DocumentTests {
    let server: TestServer

    init() throws {
        server = try TestServer()
        try server.createDatabase("db")
    }

    @Test func createReadUpdateDelete() throws {
        defer { server.stop() }
        let (status, created) = try server.json("PUT", "/db/doc", body: #"{"b":1,"a":[1,2],"big":123456789012345678901234567890}"#)
        #expect(status == 201)
        #expect(created["ok"] == true)
        #expect(created["id"] == "doc")
        let rev = try #require(created["rev"]?.stringValue)
        #expect(rev.hasPrefix("1-") && rev.count == 34)

        let response = try server.request("GET", "/db/doc")
        #expect(response.status == 200)
        #expect(response.header("ETag") == "\"\(rev)\"")
        // Key order and number text survive, with _id and _rev first.
        #expect(response.text == #"{"_id":"doc","_rev":"\#(rev)","b":1,"a":[1,2],"big":123456789012345678901234567890}"#)
        #expect(try server.request("GET", "/db/doc", headers: [("If-None-Match", "\"\(rev)\"")]).status == 304)

        let stale = try server.json("PUT", "/db/doc", body: #"{"b":2}"#)
        #expect(stale.status == 409)
        #expect(stale.json == ["error": "conflict", "reason": "Document update conflict."])

        let rev2 = try server.put("db", "doc", #"{"_rev":"\#(rev)","b":2}"#)
        #expect(rev2.hasPrefix("2-"))
        #expect(try server.json("GET", "/db/doc?rev=\(rev)").json["b"] == 1)
        #expect(try server.json("PUT", "/db/doc?rev=\(rev)", body: #"{"b":3}"#).status == 409)

        #expect(try server.json("DELETE", "/db/doc").status == 409)
        let (deleteStatus, deleted) = try server.json("DELETE", "/db/doc?rev=\(rev2)")
        #expect(deleteStatus == 200)
        let rev3 = try #require(deleted["rev"]?.stringValue)
        #expect(rev3.hasPrefix("3-"))
        #expect(try server.json("GET", "/db/doc").json == ["error": "not_found", "reason": "deleted"])
        #expect(try server.json("GET", "/db/doc?rev=\(rev3)").json["_deleted"] == true)
        #expect(try server.json("GET", "/db/nothing").json == ["error": "not_found", "reason": "missing"])
        #expect(try server.json("DELETE", "/db/nothing?rev=1-abc").status == 404)

        // A deleted document can be created again without a revision; it continues the tree.
        let rev4 = try server.put("db", "doc", #"{"again":true}"#)
        #expect(rev4.hasPrefix("4-"))
        let info = try server.json("GET", "/db").json
        #expect(info["doc_count"] == 1)
        #expect(sequenceNumber(info["update_seq"]) == 4)
    }

    @Test func batchOkAnswersAcceptedWithoutARevision() throws {
        defer { server.stop() }
        let (status, json) = try server.json("PUT", "/db/batched?batch=ok", body: #"{"v":1}"#)
        #expect(status == 202)
        #expect(json == ["ok": true, "id": "batched"])
        #expect(try server.json("GET", "/db/batched").json["v"] == 1)
    }

    @Test func revisionIDsAreDeterministic() throws {
        defer { server.stop() }
        let other = try TestServer()
        defer { other.stop() }
        try other.createDatabase("db")
        let here = try server.put("db", "same", #"{"x":{"b":1,"a":2}}"#)
        let there = try other.put("db", "same", #"{"x":{"b":1,"a":2}}"#)
        #expect(here == there)
        // Member order is part of the body CouchDB hashes.
        #expect(try other.put("db", "reordered", #"{"x":{"a":2,"b":1}}"#) != here)
        #expect(try server.put("db", "same", #"{"_rev":"\#(here)","y":1}"#) == other.put("db", "same", #"{"_rev":"\#(there)","y":1}"#))
        #expect(try server.put("db", "different", #"{"x":1}"#) != server.put("db", "different2", #"{"x":2}"#))
    }

    @Test func ifMatchAndBodyRevisionMustAgree() throws {
        defer { server.stop() }
        let rev = try server.put("db", "doc", "{}")
        let viaHeader = try server.json("PUT", "/db/doc", headers: [("If-Match", "\"\(rev)\"")], body: #"{"n":1}"#)
        #expect(viaHeader.status == 201)
        let rev2 = try #require(viaHeader.json["rev"]?.stringValue)
        let mismatch = try server.json("PUT", "/db/doc?rev=\(rev)", body: #"{"_rev":"\#(rev2)"}"#)
        #expect(mismatch.status == 400)
        #expect(try server.json("DELETE", "/db/doc", headers: [("If-Match", rev2)]).status == 200)
    }

    @Test func postGeneratesIDsAndChecksContentType() throws {
        defer { server.stop() }
        let (status, json) = try server.json("POST", "/db", body: #"{"a":1}"#)
        #expect(status == 201)
        let id = try #require(json["id"]?.stringValue)
        #expect(id.count == 32)
        #expect(try server.json("GET", "/db/\(id)").json["a"] == 1)
        #expect(try server.json("POST", "/db", body: #"{"_id":"chosen"}"#).json["id"] == "chosen")
        #expect(try server.json("POST", "/db", headers: [("Content-Type", "text/plain")], body: "{}").status == 415)
    }

    @Test func badInputGetsCouchDBErrors() throws {
        defer { server.stop() }
        let cases: [(String, String, String?, Int, String)] = [
            ("PUT", "/db/doc", "{not json", 400, "bad_request"),
            ("PUT", "/db/doc", "[1,2]", 400, "bad_request"),
            ("PUT", "/db/doc", "\"text\"", 400, "bad_request"),
            ("PUT", "/db/doc", "", 400, "bad_request"),
            ("PUT", "/db/doc", #"{"_foo":1}"#, 400, "doc_validation"),
            ("PUT", "/db/doc", #"{"_rev":"garbage"}"#, 400, "bad_request"),
            ("PUT", "/db/_bad", "{}", 400, "illegal_docid"),
            ("GET", "/db/_bad", nil, 400, "illegal_docid"),
            ("PUT", "/missing/doc", "{}", 404, "not_found"),
            ("GET", "/db/_all_docs?descending=maybe", nil, 400, "query_parse_error"),
            ("PUT", "/db/doc", "{\"a\":\"\u{1}\"}", 400, "bad_request"),
            ("PUT", "/db/doc", String(repeating: "[", count: 100_000), 400, "bad_request"),
        ]
        for (method, path, body, status, error) in cases {
            let response = try server.json(method, path, body: body)
            #expect(response.status == status, "\(method) \(path) \(body?.prefix(20) ?? "")")
            #expect(response.json["error"]?.stringValue == error, "\(method) \(path)")
            #expect(response.json["reason"]?.stringValue != nil)
        }
        // Nothing was written by any of them.
        #expect(try server.json("GET", "/db").json["doc_count"] == 0)
        #expect(sequenceNumber(try server.json("GET", "/db").json["update_seq"]) == 0)
    }

    @Test func idsWithSlashesUnicodeAndDesignDocuments() throws {
        defer { server.stop() }
        _ = try server.put("db", "a%2Fb", #"{"slash":true}"#)
        #expect(try server.json("GET", "/db/a%2Fb").json["_id"] == "a/b")
        _ = try server.put("db", "%C3%A9t%C3%A9%20%F0%9F%98%80", #"{"unicode":true}"#)
        #expect(try server.json("GET", "/db/%C3%A9t%C3%A9%20%F0%9F%98%80").json["_id"] == "été 😀")
        _ = try server.put("db", "_design/app", #"{"views":{}}"#)
        #expect(try server.json("GET", "/db/_design/app").json["_id"] == "_design/app")
        #expect(try server.json("GET", "/db/_design%2Fapp").json["_id"] == "_design/app")
        // An ID too long to replicate is refused however its path is written (found by fuzzing).
        let long = String(repeating: "a", count: DocumentID.maximumLength)
        for path in ["/db/_local/\(long)", "/db/_local%2F\(long)", "/db/_design/\(long)", "/db/_design%2F\(long)"] {
            let refused = try server.json("PUT", path, body: "{}")
            #expect(refused.status == 400 && refused.json["error"] == "illegal_docid", "\(path.prefix(20))")
        }
        // Reserved prefixes are bytes, as CouchDB matches them, in a path as in a body: an
        // underscore followed by a combining mark (one character with it) is still reserved,
        // and `_design/` followed by one is still a design document.
        for refused in [("PUT", "/db/_%CC%81", "{}"), ("GET", "/db/_%CC%81", nil),
                        ("POST", "/db", #"{"_id":"_\u0301"}"#)] {
            let answer = try server.json(refused.0, refused.1, body: refused.2)
            #expect(answer.status == 400 && answer.json["error"] == "illegal_docid", "\(refused)")
        }
        let combining = try server.json("POST", "/db", body: #"""
            {"_id":"_design/\u0301x","views":{"v":{"map":"function(doc) { emit(doc._id, 1); }"}}}
            """#)
        #expect(combining.status == 201)
        #expect(try server.json("GET", "/db/_design/%CC%81x").json["_id"] == "_design/\u{301}x")
        // Its name is what follows the prefix's bytes, the mark included.
        let view = try server.json("GET", "/db/_design/%CC%81x/_view/v")
        #expect(view.status == 200 && view.json["rows"]?.arrayValue?.isEmpty == false)
        #expect(try server.json("GET", "/db/_design/%CC%81x/_info").json["name"] == "\u{301}x")
        #expect(try server.json("GET", "/db/_design_docs").json["rows"]?.arrayValue?.count == 2)
        // Empty path segments are dropped, as CouchDB drops them.
        #expect(try server.json("GET", "/db//a%2Fb/").json["_id"] == "a/b")
        #expect(try server.json("GET", "//db/_design//app//").json["_id"] == "_design/app")
    }

    @Test func metadataOptions() throws {
        defer { server.stop() }
        let rev1 = try server.put("db", "doc", #"{"v":1}"#)
        let rev2 = try server.put("db", "doc", #"{"_rev":"\#(rev1)","v":2}"#)
        // A conflicting branch and a deleted one, written as a replicator would.
        let bulk = #"{"new_edits":false,"docs":[{"_id":"doc","_rev":"2-aaaa","v":"branch","_revisions":{"start":2,"ids":["aaaa","\#(rev1.dropFirst(2))"]}},{"_id":"doc","_rev":"2-0000","_deleted":true,"_revisions":{"start":2,"ids":["0000","\#(rev1.dropFirst(2))"]}}]}"#
        #expect(try server.json("POST", "/db/_bulk_docs", body: bulk).status == 201)

        let doc = try server.json("GET", "/db/doc?meta=true&revs=true").json
        let winner = try #require(doc["_rev"]?.stringValue)
        #expect([rev2, "2-aaaa"].max { RevisionID($0)! < RevisionID($1)! } == winner)
        #expect(doc["_conflicts"]?.arrayValue?.count == 1)
        #expect(doc["_deleted_conflicts"] == ["2-0000"])
        #expect(try doc["_local_seq"]?.intValue == sequenceNumber(server.json("GET", "/db").json["update_seq"]))
        #expect(doc["_revisions"]?["start"] == 2)
        #expect(doc["_revs_info"]?.arrayValue?.map { $0["status"]?.stringValue } == ["available", "available"])

        let openAll = try #require(try server.json("GET", "/db/doc?open_revs=all").json.arrayValue)
        #expect(openAll.count == 3)
        let openSome = try #require(try server.json("GET", #"/db/doc?open_revs=["\#(rev1)","9-zzz"]&latest=true&revs=true"#.urlQueryEscaped).json.arrayValue)
        #expect(openSome.count == 4)
        #expect(openSome.last == ["missing": "9-zzz"])
        #expect(openSome.first?["ok"]?["_revisions"] != nil)
    }

    @Test func loweredRevsLimitShortensHistoryAtOnceAndAfterCompaction() throws {
        defer { server.stop() }
        var rev = try server.put("db", "bar", #"{"count":0}"#)
        for count in 1..<6 { rev = try server.put("db", "bar", #"{"_rev":"\#(rev)","count":\#(count)}"#) }
        #expect(try server.json("GET", "/db/bar?revs=true").json["_revisions"]?["ids"]?.arrayValue?.count == 6)
        #expect(try server.request("PUT", "/db/_revs_limit", body: "5").status == 200)
        // CouchDB cuts the path it reads to the limit; compaction then stems the stored tree.
        var revisions = try server.json("GET", "/db/bar?revs=true").json["_revisions"]
        #expect(revisions?["ids"]?.arrayValue?.count == 5 && revisions?["start"] == 6)
        #expect(try server.json("POST", "/db/_compact", body: "").status == 202)
        for _ in 0..<100 {
            if try server.json("GET", "/db").json["compact_running"] != true { break }
            Thread.sleep(forTimeInterval: 0.05)
        }
        revisions = try server.json("GET", "/db/bar?revs=true").json["_revisions"]
        #expect(revisions?["ids"]?.arrayValue?.count == 5)
        #expect(try server.json("GET", "/db/bar?revs_info=true").json["_revs_info"]?.arrayValue?.count == 5)
    }

    @Test func copyToANewAndAnExistingDocument() throws {
        defer { server.stop() }
        _ = try server.put("db", "source", #"{"v":1}"#)
        let (status, copied) = try server.json("COPY", "/db/source", headers: [("Destination", "target")])
        #expect(status == 201)
        #expect(copied["id"] == "target")
        #expect(try server.json("GET", "/db/target").json["v"] == 1)
        #expect(try server.json("COPY", "/db/source", headers: [("Destination", "target")]).status == 409)
        let rev = try #require(copied["rev"]?.stringValue)
        #expect(try server.json("COPY", "/db/source", headers: [("Destination", "target?rev=\(rev)")]).status == 201)
        #expect(try server.json("COPY", "/db/source").status == 400)
    }

    @Test func localDocumentsHaveTheirOwnRevisionsAndStayOutOfFeeds() throws {
        defer { server.stop() }
        let (status, created) = try server.json("PUT", "/db/_local/cp=1._x", body: #"{"session_id":"s","source_last_seq":5,"history":[]}"#)
        #expect(status == 201)
        #expect(created["rev"] == "0-1")
        #expect(try server.json("GET", "/db/_local%2Fcp=1._x").json["source_last_seq"] == 5)
        #expect(try server.json("PUT", "/db/_local/cp=1._x", body: #"{"x":1}"#).status == 409)
        #expect(try server.json("PUT", "/db/_local%2Fcp=1._x", body: #"{"_rev":"0-1","x":2}"#).json["rev"] == "0-2")
        #expect(try server.json("GET", "/db/_all_docs").json["rows"] == [])
        #expect(try server.json("GET", "/db/_changes").json["results"] == [])
        #expect(sequenceNumber(try server.json("GET", "/db").json["update_seq"]) == 0)
        #expect(try server.json("DELETE", "/db/_local/cp=1._x?rev=0-2").status == 200)
        #expect(try server.json("GET", "/db/_local/cp=1._x").status == 404)
    }
}

extension String {
    /// Escapes the characters of a JSON query value that cannot appear raw in a URL.
    var urlQueryEscaped: String {
        replacingOccurrences(of: "\"", with: "%22").replacingOccurrences(of: "[", with: "%5B")
            .replacingOccurrences(of: "]", with: "%5D").replacingOccurrences(of: ",", with: "%2C")
    }
}
