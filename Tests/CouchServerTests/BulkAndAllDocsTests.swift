import CouchCore
import CouchTestSupport
import Foundation
import Testing

@Suite struct BulkAndAllDocsTests {
    let server: TestServer

    init() throws {
        server = try TestServer()
        try server.createDatabase("db")
    }

    @Test func bulkDocsReportsEachDocument() throws {
        defer { server.stop() }
        let existing = try server.put("db", "taken", "{}")
        let (status, results) = try server.json("POST", "/db/_bulk_docs", body: #"""
            {"docs":[{"_id":"a","n":1},{"_id":"taken","n":2},{"n":3},{"_id":"taken","_rev":"\#(existing)","n":4}]}
            """#)
        #expect(status == 201)
        let rows = try #require(results.arrayValue)
        #expect(rows.count == 4)
        #expect(rows[0]["ok"] == true && rows[0]["id"] == "a")
        #expect(rows[1] == ["id": "taken", "error": "conflict", "reason": "Document update conflict."])
        #expect(rows[2]["id"]?.stringValue?.count == 32)
        #expect(rows[3]["rev"]?.stringValue?.hasPrefix("2-") == true)
    }

    @Test func bulkDocsValidatesItsEnvelope() throws {
        defer { server.stop() }
        #expect(try server.json("POST", "/db/_bulk_docs", body: #"{"documents":[]}"#).status == 400)
        #expect(try server.json("POST", "/db/_bulk_docs", body: #"{"docs":{}}"#).status == 400)
        #expect(try server.json("POST", "/db/_bulk_docs", body: #"{"docs":[],"new_edits":"no"}"#).status == 400)
        #expect(try server.json("POST", "/db/_bulk_docs", body: #"{"docs":[1]}"#).status == 400)
        #expect(try server.json("POST", "/db/_bulk_docs", headers: [("Content-Type", "text/plain")], body: #"{"docs":[]}"#).status == 415)
        #expect(sequenceNumber(try server.json("GET", "/db").json["update_seq"]) == 0)
    }

    @Test func replicatedWritesAreIdempotentAndKeepConflicts() throws {
        defer { server.stop() }
        let body = #"""
            {"new_edits":false,"docs":[
              {"_id":"d","_rev":"3-c","_revisions":{"start":3,"ids":["c","b","a"]},"side":"one"},
              {"_id":"d","_rev":"3-z","_revisions":{"start":3,"ids":["z","y","a"]},"side":"two"}]}
            """#
        let first = try server.json("POST", "/db/_bulk_docs", body: body)
        #expect(first.status == 201)
        #expect(first.json == [])
        let sequence = try server.json("GET", "/db").json["update_seq"]
        // Sending the same revisions again changes nothing and is not an error.
        #expect(try server.json("POST", "/db/_bulk_docs", body: body).json == [])
        #expect(try server.json("GET", "/db").json["update_seq"] == sequence)

        let doc = try server.json("GET", "/db/d?conflicts=true").json
        #expect(doc["_rev"] == "3-z")
        #expect(doc["side"] == "two")
        #expect(doc["_conflicts"] == ["3-c"])
        // A stale revision from a peer is stored as history, never answered with 409.
        let put = try server.json("PUT", "/db/d?new_edits=false", body: #"{"_rev":"2-b","_revisions":{"start":2,"ids":["b","a"]}}"#)
        #expect(put.status == 201)
    }

    /// A new document is written without first being looked up; one that turns out to exist is
    /// then written as any edit is: a replicated first revision of it becomes a conflict, an
    /// edit without `_rev` is refused, and the sequences of the batch's writes follow each other
    /// with no gap where a write found its document there.
    @Test func firstRevisionsOfDocumentsThatExistAreMergedWithThem() throws {
        defer { server.stop() }
        let existing = try server.put("db", "x", #"{"n":0}"#)
        let replicated = try server.json("POST", "/db/_bulk_docs", body: #"""
            {"new_edits":false,"docs":[{"_id":"x","_rev":"1-ffffffffffffffffffffffffffffffff","n":1},
                                       {"_id":"y","_rev":"1-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa","n":2}]}
            """#)
        #expect(replicated.status == 201 && replicated.json == [])
        let x = try server.json("GET", "/db/x?conflicts=true").json
        #expect(x["_rev"] == "1-ffffffffffffffffffffffffffffffff")
        #expect(x["_conflicts"] == [JSONValue(existing)])
        #expect(try server.json("GET", "/db/y").json["n"] == 2)

        let interactive = try server.json("POST", "/db/_bulk_docs", body: #"{"docs":[{"_id":"y","n":3},{"_id":"z","n":4}]}"#)
        let rows = try #require(interactive.json.arrayValue)
        #expect(rows.count == 2)
        #expect(rows[0]["error"] == "conflict")
        #expect(rows[1]["ok"] == true)
        let changes = try server.json("GET", "/db/_changes").json
        let listed = try #require(changes["results"]?.arrayValue).map { ($0["id"]?.stringValue ?? "", sequenceNumber($0["seq"]) ?? 0) }
        #expect(listed.map(\.0) == ["x", "y", "z"])
        #expect(listed.map(\.1) == [2, 3, 4], "sequences \(listed)")
        #expect(try server.json("GET", "/db").json["doc_count"] == 3)
    }

    /// `total_rows` and `offset` count live documents only, deletions before and after the
    /// start key left out, in either direction, with `skip`, and within `_design_docs`.
    @Test func allDocsOffsetCountsLiveDocumentsOnly() throws {
        defer { server.stop() }
        var revisions: [String: String] = [:]
        for id in ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "_design/x", "_design/y", "_design/z"] {
            revisions[id] = try server.put("db", id, "{}")
        }
        for id in ["c", "e", "h", "_design/x"] {
            #expect(try server.request("DELETE", "/db/\(id)?rev=\(revisions[id]!)").status == 200)
        }
        func position(_ path: String) throws -> (total: Int?, offset: Int?, first: String?) {
            let json = try server.json("GET", path).json
            return (json["total_rows"]?.intValue, json["offset"]?.intValue, json["rows"]?[0]?["id"]?.stringValue)
        }
        // Live: _design/y, _design/z, a, b, d, f, g, i, j.
        #expect(try position("/db/_all_docs") == (9, 0, "_design/y"))
        #expect(try position("/db/_all_docs?startkey=%22f%22") == (9, 5, "f"))
        #expect(try position("/db/_all_docs?startkey=%22e%22") == (9, 5, "f"))
        #expect(try position("/db/_all_docs?startkey=%22f%22&skip=1") == (9, 6, "g"))
        #expect(try position("/db/_all_docs?startkey=%22f%22&descending=true") == (9, 3, "f"))
        #expect(try position("/db/_all_docs?startkey=%22h%22&descending=true") == (9, 2, "g"))
        #expect(try position("/db/_design_docs") == (2, 0, "_design/y"))
        #expect(try position("/db/_design_docs?startkey=%22_design/z%22") == (2, 1, "_design/z"))
    }

    /// `offset` while a client pages on with `startkey` and `skip=1` (counted from the last
    /// page's count when it can be) is the number of live rows before the page, in both
    /// directions, through creations before the page, deletions and purges between pages.
    @Test func allDocsOffsetWhilePagingCountsTheRowsBefore() throws {
        defer { server.stop() }
        let documents = (0..<50).map { #"{"_id":"k\#(String(format: "%02d", $0))"}"# }.joined(separator: ",")
        #expect(try server.json("POST", "/db/_bulk_docs", body: #"{"docs":[\#(documents)]}"#).status == 201)
        func revision(_ id: String) throws -> String {
            try server.json("GET", "/db/\(id)").json["_rev"]?.stringValue ?? ""
        }
        for descending in [false, true] {
            var start: String?
            for page in 0..<10 {
                let order = descending ? "&descending=true" : ""
                let from = start.map { "&startkey=%22\($0)%22&skip=1" } ?? ""
                let listing = try server.json("GET", "/db/_all_docs?limit=6\(order)\(from)").json
                let rows = listing["rows"]?.arrayValue ?? []
                if let start {
                    // Rows before `start` in this order, listed rather than counted; `skip` on top.
                    let before = try server.json("GET", "/db/_all_docs?endkey=%22\(start)%22&inclusive_end=false\(order)")
                        .json["rows"]?.arrayValue?.count ?? -1
                    let total = try #require(listing["total_rows"]?.intValue)
                    #expect(listing["offset"]?.intValue == min(before + 1, total), "page \(page), descending \(descending)")
                }
                guard let last = rows.last?["id"]?.stringValue else { break }
                start = last
                switch page {
                case 1:  // created before the page, in either order
                    _ = try server.put("db", descending ? "z\(page)" : "a\(page)", "{}")
                case 3:
                    #expect(try server.json("DELETE", "/db/\(last)?rev=\(try revision(last))").status == 200)
                case 5:  // a purge removes a row without a new sequence
                    let passed = rows[0]["id"]?.stringValue ?? ""
                    #expect(try server.json("POST", "/db/_purge", body: #"{"\#(passed)":["\#(try revision(passed))"]}"#).status == 201)
                default: break
                }
            }
        }
    }

    /// A listing's rows are written from the stored bytes when they can be: every row is the
    /// document as a `GET` answers it, whatever its ID needs escaped and whatever form its
    /// revision came in (an MD5 in upper case is answered in lower case).
    @Test func allDocsRowsAreTheDocumentsAsRead() throws {
        defer { server.stop() }
        let created = try server.json("POST", "/db/_bulk_docs", body: #"""
            {"new_edits":false,"docs":[
              {"_id":"plain","_rev":"2-0123456789abcdef0123456789abcdef","n":1},
              {"_id":"upper","_rev":"1-0123456789ABCDEF0123456789ABCDEF","n":2},
              {"_id":"text","_rev":"12-not-an-md5","n":3},
              {"_id":"odd","_rev":"1-a_b.C","n":4},
              {"_id":"q\"uo\\te\ttab","_rev":"1-abc","n":5},
              {"_id":"été ☃","_rev":"1-def","n":6}]}
            """#)
        #expect(created.status == 201)
        _ = try server.put("db", "new", #"{"nested":{"a":[1,"two",null]},"s":"x\"y"}"#)
        _ = try server.put("db", "empty", "{}")
        #expect(try server.request("PUT", "/db/attached/file.txt", headers: [("Content-Type", "text/plain")],
                                   body: "hello").status == 201)

        for query in ["include_docs=true", "include_docs=true&descending=true", "include_docs=false"] {
            let listing = try server.json("GET", "/db/_all_docs?\(query)").json
            let rows = try #require(listing["rows"]?.arrayValue)
            #expect(rows.count == 9)
            for row in rows {
                let id = try #require(row["id"]?.stringValue)
                let path = "/db/" + id.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
                let document = try server.json("GET", path).json
                #expect(row["key"] == row["id"])
                #expect(row["value"] == ["rev": document["_rev"] ?? .null])
                if query.hasPrefix("include_docs=true") {
                    #expect(row["doc"] == document)
                } else {
                    #expect(row.objectValue?.keys.contains("doc") == false)
                }
            }
        }
        let upper = try server.json("GET", "/db/_all_docs?key=%22upper%22").json
        #expect(upper["rows"]?[0]?["value"]?["rev"] == "1-0123456789abcdef0123456789abcdef")
    }

    @Test func allDocsRangesKeysAndDocs() throws {
        defer { server.stop() }
        for id in ["c", "a", "e", "b", "d"] { _ = try server.put("db", id, #"{"id":"\#(id)"}"#) }
        let deletedRev = try server.put("db", "x", "{}")
        _ = try server.json("DELETE", "/db/x?rev=\(deletedRev)")

        let all = try server.json("GET", "/db/_all_docs").json
        #expect(all["total_rows"] == 5)
        #expect(all["offset"] == 0)
        #expect(all["rows"]?.arrayValue?.compactMap { $0["id"]?.stringValue } == ["a", "b", "c", "d", "e"])

        let range = try server.json("GET", "/db/_all_docs?startkey=%22b%22&endkey=%22d%22&inclusive_end=false").json
        #expect(range["rows"]?.arrayValue?.compactMap { $0["key"]?.stringValue } == ["b", "c"])
        #expect(range["offset"] == 1)

        let descending = try server.json("GET", "/db/_all_docs?descending=true&limit=2&skip=1&include_docs=true").json
        #expect(descending["rows"]?.arrayValue?.compactMap { $0["id"]?.stringValue } == ["d", "c"])
        #expect(descending["rows"]?[0]?["doc"]?["id"] == "d")

        let keyed = try server.json("POST", "/db/_all_docs?include_docs=true", body: #"{"keys":["e","nope","x"]}"#).json
        let rows = try #require(keyed["rows"]?.arrayValue)
        #expect(rows[0]["id"] == "e")
        #expect(rows[1] == ["key": "nope", "error": "not_found"])
        #expect(rows[2]["value"]?["deleted"] == true)
        #expect(rows[2]["doc"] == .null)
        #expect(try server.json("GET", "/db/_all_docs?key=%22c%22").json["rows"]?.arrayValue?.count == 1)
        #expect(sequenceNumber(try server.json("GET", "/db/_all_docs?update_seq=true").json["update_seq"]) == 7)
        #expect(try server.json("GET", "/db/_all_docs?limit=-1").status == 400)
    }
}

extension JSONValue {
    subscript(index: Int) -> JSONValue? {
        guard let array = arrayValue, array.indices.contains(index) else { return nil }
        return array[index]
    }
}
