import CouchCore
import CouchTestSupport
import Foundation
import Testing

/// Corners where real clients' suites found Couchette answering otherwise than CouchDB 3.
@Suite struct CouchDBEdgeCaseTests {
    let server: TestServer

    init() throws {
        server = try TestServer()
        try server.createDatabase("db")
    }

    private func ids(_ json: JSONValue) -> [String] {
        json["rows"]?.arrayValue?.compactMap { $0["id"]?.stringValue } ?? []
    }

    @Test func nulInKeysStartsAfterThePrefixAndPagingNeverRepeats() throws {
        defer { server.stop() }
        let all = ["abc", "abc d", "abcd", "abd", "b"]
        for id in all { _ = try server.put("db", id.replacingOccurrences(of: " ", with: "%20"), "{}") }
        let after = try server.json("GET", "/db/_all_docs?startkey=%22abc%5Cu0000%22").json
        #expect(ids(after) == ["abc d", "abcd", "abd", "b"])
        let before = try server.json("GET", "/db/_all_docs?endkey=%22abc%5Cu0000%22&inclusive_end=false").json
        #expect(ids(before) == ["abc"])
        // Paging by "last id + \u0000" walks every document once.
        var seen: [String] = []
        var query = "limit=2"
        while true {
            let page = ids(try server.json("GET", "/db/_all_docs?\(query)").json)
            if page.isEmpty { break }
            seen += page
            let next = JSONValue(page.last! + "\u{0}").serializedString()
            query = "limit=2&startkey=" + next.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
        }
        #expect(seen == all)
    }

    @Test func revisionsWinOverRevAndRevisionlessReplicatedDocumentsAreRefused() throws {
        defer { server.stop() }
        let body = #"{"new_edits":false,"docs":[{"_id":"a","_rev":"1-aaa","_revisions":{"start":2,"ids":["bbb","aaa"]},"v":1},"#
            + #"{"_id":"b","_revisions":{"start":1,"ids":["ccc"]},"_rev":"1-","v":2}]}"#
        let (status, result) = try server.json("POST", "/db/_bulk_docs", body: body)
        #expect(status == 201)
        #expect(result == [])
        #expect(try server.json("GET", "/db/a").json["_rev"] == "2-bbb")
        #expect(try server.json("GET", "/db/a?revs=true").json["_revisions"] == ["start": 2, "ids": ["bbb", "aaa"]])
        #expect(try server.json("GET", "/db/b").json["_rev"] == "1-ccc")
        // A bare "1-" is a revision, not a format error: on a new document it is a conflict.
        #expect(try server.json("PUT", "/db/c", body: #"{"_rev":"1-"}"#).status == 409)
        // Without `_rev` or `_revisions`, a replicated write fails the whole request.
        let missing = #"{"new_edits":false,"docs":[{"_id":"d","_rev":"1-ddd"},{"_id":"e","v":1}]}"#
        let refused = try server.json("POST", "/db/_bulk_docs", body: missing)
        #expect(refused.status == 400)
        #expect(refused.json == ["error": "bad_request",
                                 "reason": "When `new_edits: false`, the document needs `_rev` or `_revisions` specified"])
        #expect(try server.json("GET", "/db/d").status == 404)
        let put = try server.json("PUT", "/db/e?new_edits=false", body: #"{"v":1}"#)
        #expect(put.status == 400)
        #expect(put.json["reason"] == "When `new_edits: false`, the document needs `_rev` or `_revisions` specified")
    }

    @Test func inlineDataWithAStaleDigestIsStoredWithANewRevpos() throws {
        defer { server.stop() }
        let first = try server.put("db", "doc", #"{"_attachments":{"a.txt":{"content_type":"text/plain","data":"b2xk"}}}"#)
        let stub = try #require(try server.json("GET", "/db/doc").json["_attachments"]?["a.txt"]?.objectValue)
        var edited = stub
        edited["stub"] = nil
        edited["data"] = JSONValue(Data("new data".utf8).base64EncodedString())
        let body = JSONValue.object(["_rev": JSONValue(first), "_attachments": ["a.txt": .object(edited)]]).serializedString()
        let second = try server.put("db", "doc", body)
        let attachment = try #require(try server.json("GET", "/db/doc").json["_attachments"]?["a.txt"])
        #expect(attachment["revpos"] == 2)
        #expect(attachment["digest"] != stub["digest"])
        #expect(attachment["length"] == 8)
        #expect(try server.request("GET", "/db/doc/a.txt").text == "new data")
        #expect(second.hasPrefix("2-"))
    }

    @Test func latestFollowsARevisionToItsLeaf() throws {
        defer { server.stop() }
        let first = try server.put("db", "doc", #"{"v":1}"#)
        let second = try server.put("db", "doc", #"{"_rev":"\#(first)","v":2}"#)
        let latest = try server.json("GET", "/db/doc?rev=\(first)&latest=true").json
        #expect(latest["_rev"] == JSONValue(second))
        #expect(latest["v"] == 2)
        #expect(try server.json("GET", "/db/doc?rev=\(first)").json["v"] == 1)
    }

    @Test func localDocumentsIgnoreRevisionsAndReplicationFieldsAreAllowed() throws {
        defer { server.stop() }
        let local = try server.json("PUT", "/db/_local/cp", body: #"{"_revisions":{"start":5,"ids":["x","y"]},"v":1}"#)
        #expect(local.status == 201)
        #expect(local.json["rev"] == "0-1")
        let fields = #"{"_replication_id":"r","_replication_state":"completed","_replication_state_time":"2026-01-01T00:00:00Z","#
            + #""_replication_stats":{"docs_written":1},"v":1}"#
        let (status, _) = try server.json("PUT", "/db/replicated", body: fields)
        #expect(status == 201)
        let stored = try server.json("GET", "/db/replicated").json
        #expect(stored["_replication_state"] == "completed")
        #expect(stored["_replication_stats"]?["docs_written"] == 1)
    }

    @Test func noCacheableETagWhenTheBodyDependsOnTheTree() throws {
        defer { server.stop() }
        let rev = try server.put("db", "doc", #"{"v":1}"#)
        let plain = try server.request("GET", "/db/doc")
        #expect(plain.header("ETag") == "\"\(rev)\"")
        for options in ["conflicts=true", "deleted_conflicts=true", "meta=true", "revs_info=true", "local_seq=true",
                        "attachments=true", "atts_since=%5B%5D"] {
            let response = try server.request("GET", "/db/doc?\(options)", headers: [("If-None-Match", "\"\(rev)\"")])
            #expect(response.status == 200, "\(options)")
            #expect(response.header("ETag") == nil, "\(options)")
        }
        // A conflict arrives: the same request shows it at once.
        _ = try server.json("PUT", "/db/doc?new_edits=false", body: #"{"_rev":"1-0000","v":0}"#)
        #expect(try server.json("GET", "/db/doc?conflicts=true").json["_conflicts"] == ["1-0000"])
    }

    @Test func changesHonourLastEventID() throws {
        defer { server.stop() }
        for id in ["a", "b", "c"] { _ = try server.put("db", id, "{}") }
        let rows = try #require(try server.json("GET", "/db/_changes").json["results"]?.arrayValue)
        let second = try #require(rows[1]["seq"]?.stringValue)
        let viaQuery = try server.json("GET", "/db/_changes?last-event-id=\(second)").json
        #expect(viaQuery["results"]?.arrayValue?.map { $0["id"] } == ["c"])
        let connection = try HTTPTestConnection(port: server.port)
        defer { connection.close() }
        _ = try connection.startStreaming("GET", "/db/_changes?feed=eventsource&timeout=100",
                                          headers: [("Last-Event-ID", second)])
        let data = try #require(try connection.readLine(timeout: 5))
        #expect(try JSONValue.parse(String(data.dropFirst(6)))["id"] == "c")
    }

    @Test func booleansKeysAndCopy() throws {
        defer { server.stop() }
        _ = try server.put("db", "a", #"{"v":1}"#)
        let capitalized = try server.json("GET", "/db/_all_docs?include_docs=True").json
        #expect(capitalized["rows"]?[0]?["doc"]?["v"] == 1)
        let notBoolean = try server.json("GET", "/db/_all_docs?descending=yes")
        #expect(notBoolean.status == 400)
        #expect(notBoolean.json["error"] == "query_parse_error")
        // Document options that are not "true" are ignored, as CouchDB ignores them.
        #expect(try server.json("GET", "/db/a?conflicts=1").status == 200)
        let both = try server.json("POST", "/db/_all_docs?key=%22a%22", body: #"{"keys":["a"]}"#)
        #expect(both.status == 400)
        #expect(both.json == ["error": "query_parse_error", "reason": "`keys` is incompatible with `key`, `start_key` and `end_key`"])
        let copy = try server.request("COPY", "/db/a", headers: [("Destination", "b")])
        #expect(copy.status == 201)
        #expect(copy.header("Location")?.hasSuffix("/db/b") == true)
    }

    @Test func revisionListsOrderDigestsAsTheBytesTheyEncode() throws {
        defer { server.stop() }
        let high = "1-" + String(repeating: "f", count: 32), low = "1-7" + String(repeating: "f", count: 31)
        for rev in [high, "1-b", low] {
            #expect(try server.json("PUT", "/db/doc?new_edits=false", body: #"{"_rev":"\#(rev)"}"#).status == 201)
        }
        // As binaries: 0xff… > 0x7f… > "b" (0x62); compared as text "b" would sort above "7f…".
        let doc = try server.json("GET", "/db/doc?conflicts=true").json
        #expect(doc["_rev"] == JSONValue(high))
        #expect(doc["_conflicts"] == [JSONValue(low), "1-b"])
    }

    @Test func shardsAndCopiesAreAcceptedAndShown() throws {
        defer { server.stop() }
        #expect(try server.request("PUT", "/sharded?q=8&n=3").status == 201)
        #expect(try server.json("GET", "/sharded").json["cluster"] == ["q": 8, "n": 3, "w": 2, "r": 2])
        #expect(try server.json("GET", "/db").json["cluster"] == ["q": 1, "n": 1, "w": 1, "r": 1])
        #expect(try server.request("PUT", "/bad?q=0").status == 400)
    }

    /// As CouchDB 3.4 answers them: keys that are not strings name no document, and a keys
    /// query has no offset.
    @Test func allDocsKeysOfAnyJSONAnswerNotFoundRows() throws {
        defer { server.stop() }
        _ = try server.put("db", "a", "{}")
        let answer = try server.request("POST", "/db/_all_docs", body: #"{"keys":[1,null,{},"a",["x"]]}"#)
        #expect(answer.status == 200)
        let json = try JSONValue.parse(answer.body)
        #expect(json["offset"] == .null)
        #expect(json["total_rows"] == 1)
        let rows = json["rows"]?.arrayValue ?? []
        #expect(rows.map { $0["key"] ?? .null } == [1, .null, [:], "a", ["x"]])
        #expect(rows.map { $0["error"]?.stringValue } == ["not_found", "not_found", "not_found", nil, "not_found"])
        #expect(try server.json("GET", "/db/_all_docs?keys=%5B1%2Cnull%5D").json["rows"]?.arrayValue?.count == 2)
        #expect(try server.json("GET", "/db/_all_docs").json["offset"] == 0)
    }

    /// CouchDB stores only gzip and identity codings; another is refused rather than stored
    /// under a coding its bytes may not have.
    @Test func attachmentCodingsOtherThanGzipAreRefused() throws {
        defer { server.stop() }
        for coding in ["deflate", "br", "GZIP"] {
            let body = #"{"_attachments":{"x.txt":{"content_type":"text/plain","data":"aGVsbG8=","encoding":"\#(coding)"}}}"#
            let answer = try server.json("PUT", "/db/\(coding)", body: body)
            #expect(answer.status == 415, "\(coding): \(answer.json.serializedString())")
            #expect(answer.json["error"] == "bad_content_type")
            #expect(try server.request("GET", "/db/\(coding)").status == 404)
        }
        let number = #"{"_attachments":{"x.txt":{"content_type":"text/plain","data":"aGVsbG8=","encoding":7}}}"#
        #expect(try server.json("PUT", "/db/number", body: number).status == 400)
        // (A type CouchDB does not compress: text/* would be stored gzip-compressed.)
        let identity = #"{"_attachments":{"x.txt":{"content_type":"application/octet-stream","data":"aGVsbG8=","encoding":"identity"}}}"#
        #expect(try server.json("PUT", "/db/identity", body: identity).status == 201)
        #expect(try server.request("GET", "/db/identity/x.txt").text == "hello")
        let stub = try server.json("GET", "/db/identity?att_encoding_info=true").json["_attachments"]?["x.txt"]
        #expect(stub?["encoding"] == nil)
    }

    /// A bare number past the last change is no position of the database (CouchDB refuses every
    /// bare number); CouchDB's own form is read as CouchDB reads it.
    @Test func changesSinceABareNumberPastTheLastChangeIsRefused() throws {
        defer { server.stop() }
        _ = try server.put("db", "a", "{}")
        _ = try server.put("db", "b", "{}")
        for since in ["9223372036854775807", "3", "%223%22", "99999999999999999999999", "-1"] {
            let answer = try server.json("GET", "/db/_changes?since=\(since)")
            #expect(answer.status == 400, "since=\(since)")
            #expect(answer.json == ["error": "bad_request", "reason": "Malformed sequence supplied in 'since' parameter."])
        }
        #expect(try server.json("GET", "/db/_changes?since=9223372036854775807&feed=longpoll&timeout=10").status == 400)
        let current = try server.json("GET", "/db/_changes?since=2").json
        #expect(current["results"] == [])
        #expect(UpdateSequence(json: current["last_seq"] ?? .null)?.number == 2)
        #expect(try server.json("GET", "/db/_changes?since=1").json["results"]?.arrayValue?.count == 1)
    }
}
