import CouchCore
import CouchTestSupport
import Foundation
import Testing

/// Views over real HTTP: map and reduce, CouchDB's parameters and errors, updates after
/// writes, deletions, conflicts and purges, rebuilds only when the functions change.
@Suite struct ViewRouteTests {
    static let design = #"""
        {"views": {
          "by_type": {"map": "function(doc) { if (doc.type) emit(doc.type, doc.n); }", "reduce": "_sum"},
          "by_n": {"map": "function(doc) { if (doc.n !== undefined) emit(doc.n, null); }", "reduce": "_count"},
          "stats": {"map": "function(doc) { if (doc.n !== undefined) emit([doc.type, doc.n], doc.n); }", "reduce": "_stats"},
          "js": {"map": "function(doc) { if (doc.n !== undefined) emit(doc.type, doc.n); }",
                 "reduce": "function(keys, values, rereduce) { return sum(values) * (rereduce ? 1 : 1); }"},
          "throws": {"map": "function(doc) { if (doc.n == 3) throw new Error('three'); emit(doc._id, doc._conflicts || null); }"}
        }}
        """#

    private func server() throws -> TestServer {
        let server = try TestServer()
        try server.createDatabase("db")
        try server.put("db", "_design/app", Self.design)
        let documents = (1...6).map { #"{"_id":"d\#($0)","type":"\#($0 % 2 == 0 ? "even" : "odd")","n":\#($0)}"# }
        let (status, _) = try server.json("POST", "/db/_bulk_docs", body: #"{"docs":[\#(documents.joined(separator: ","))]}"#)
        #expect(status == 201)
        return server
    }

    private func rows(_ json: JSONValue) -> [JSONValue] { json["rows"]?.arrayValue ?? [] }

    /// `offset` while a client pages on with `startkey`, `startkey_docid` and `skip=1` (counted
    /// from the last page's count when it can be) is the number of rows before the page, in both
    /// directions, through rows added before the page, deletions and purges between pages, and
    /// pages started at a key alone.
    @Test func offsetWhilePagingCountsTheRowsBefore() throws {
        let server = try TestServer()
        defer { server.stop() }
        try server.createDatabase("db")
        try server.put("db", "_design/app", #"{"views":{"by_g":{"map":"function(doc) { if (doc.g !== undefined) emit(doc.g, null); }"}}}"#)
        let documents = (0..<40).map { #"{"_id":"d\#(String(format: "%02d", $0))","g":\#($0 % 5)}"# }.joined(separator: ",")
        #expect(try server.json("POST", "/db/_bulk_docs", body: #"{"docs":[\#(documents)]}"#).status == 201)
        func revision(_ id: String) throws -> String {
            try server.json("GET", "/db/\(id)").json["_rev"]?.stringValue ?? ""
        }
        let view = "/db/_design/app/_view/by_g"
        for descending in [false, true] {
            let order = descending ? "&descending=true" : ""
            var start: (key: Int, id: String)?
            for page in 0..<9 {
                // Page 4 starts at its key alone (every row of the key, none skipped).
                let keyOnly = page == 4
                let from = start.map { keyOnly ? "&startkey=\($0.key)" : "&startkey=\($0.key)&startkey_docid=\($0.id)&skip=1" } ?? ""
                let listing = try server.json("GET", "\(view)?limit=6\(order)\(from)").json
                if let start {
                    let end = keyOnly ? "&endkey=\(start.key)" : "&endkey=\(start.key)&endkey_docid=\(start.id)"
                    let before = try server.json("GET", "\(view)?inclusive_end=false\(order)\(end)").json["rows"]?.arrayValue?.count ?? -1
                    let total = try #require(listing["total_rows"]?.intValue)
                    #expect(listing["offset"]?.intValue == min(before + (keyOnly ? 0 : 1), total), "page \(page), descending \(descending)")
                }
                let rows = listing["rows"]?.arrayValue ?? []
                guard let last = rows.last, let key = last["key"]?.intValue, let id = last["id"]?.stringValue else { break }
                start = (key, id)
                switch page {
                case 1:  // rows before the page, in either order
                    _ = try server.put("db", "new\(descending)", #"{"g":\#(descending ? 9 : -1)}"#)
                case 2:
                    #expect(try server.json("DELETE", "/db/\(id)?rev=\(try revision(id))").status == 200)
                case 5:
                    let passed = rows[0]["id"]?.stringValue ?? ""
                    #expect(try server.json("POST", "/db/_purge", body: #"{"\#(passed)":["\#(try revision(passed))"]}"#).status == 201)
                default: break
                }
            }
        }
    }

    /// `total_rows` after each write (kept up to date by the index's batches rather than
    /// counted again) is the number of rows the view lists, through documents emitting more
    /// rows, fewer, none, deleted and purged, in an index of views that only map and in one
    /// beside a view that reduces.
    @Test func totalRowsFollowEveryWrite() throws {
        let server = try TestServer()
        defer { server.stop() }
        try server.createDatabase("db")
        let each = #"{"map": "function(doc) { for (var i = 0; i < (doc.k || 0); i++) emit(i, null); }"}"#
        try server.put("db", "_design/plain", #"{"views": {"each": \#(each)}}"#)
        try server.put("db", "_design/app", #"""
            {"views": {"each": \#(each),
                       "counted": {"map": "function(doc) { if (doc.k > 1) emit(doc.k, 1); }", "reduce": "_count"}}}
            """#)
        func check(_ step: String) throws {
            for view in ["plain/_view/each", "app/_view/each", "app/_view/counted"] {
                let path = "/db/_design/\(view)?reduce=false"
                let head = try server.json("GET", path + "&limit=1").json
                let listed = try server.json("GET", path).json["rows"]?.arrayValue?.count
                #expect(head["total_rows"]?.intValue == listed, "\(view) after \(step)")
            }
        }
        func revision(_ id: String) throws -> String { try server.json("GET", "/db/\(id)").json["_rev"]?.stringValue ?? "" }
        try check("nothing")
        let documents = (0..<20).map { #"{"_id":"d\#($0)","k":\#($0 % 4)}"# }.joined(separator: ",")
        #expect(try server.json("POST", "/db/_bulk_docs", body: #"{"docs":[\#(documents)]}"#).status == 201)
        try check("the first documents")
        _ = try server.put("db", "d1", #"{"_rev":"\#(try revision("d1"))","k":5}"#)
        try check("more rows")
        _ = try server.put("db", "d3", #"{"_rev":"\#(try revision("d3"))","k":1}"#)
        _ = try server.put("db", "d7", #"{"_rev":"\#(try revision("d7"))"}"#)
        try check("fewer rows and none")
        #expect(try server.json("DELETE", "/db/d2?rev=\(try revision("d2"))").status == 200)
        try check("a deletion")
        #expect(try server.json("POST", "/db/_purge", body: #"{"d5":["\#(try revision("d5"))"]}"#).status == 201)
        try check("a purge")
        for round in 0..<3 {
            let more = (0..<5).map { #"{"_id":"r\#(round)-\#($0)","k":\#($0)}"# }.joined(separator: ",")
            #expect(try server.json("POST", "/db/_bulk_docs", body: #"{"docs":[\#(more)]}"#).status == 201)
            try check("round \(round)")
        }
    }

    @Test func mapQueriesHonourCouchDBsParameters() throws {
        let server = try server()
        defer { server.stop() }
        var (status, json) = try server.json("GET", "/db/_design/app/_view/by_n?reduce=false")
        #expect(status == 200)
        #expect(json["total_rows"] == 6)
        #expect(json["offset"] == 0)
        #expect(rows(json).map { $0["id"] } == (1...6).map { JSONValue("d\($0)") })
        (_, json) = try server.json("GET", "/db/_design/app/_view/by_n?reduce=false&startkey=2&endkey=4&inclusive_end=false")
        #expect(rows(json).map { $0["key"] } == [2, 3])
        #expect(json["offset"] == 1)
        (_, json) = try server.json("GET", "/db/_design/app/_view/by_n?reduce=false&descending=true&skip=1&limit=2")
        #expect(rows(json).map { $0["key"] } == [5, 4])
        #expect(json["offset"] == 1)
        (_, json) = try server.json("GET", "/db/_design/app/_view/by_n?reduce=false&key=5&include_docs=true")
        #expect(rows(json).first?["doc"]?["_id"] == "d5")
        (_, json) = try server.json("POST", "/db/_design/app/_view/by_n?reduce=false", body: #"{"keys":[6,1,42]}"#)
        #expect(rows(json).map { $0["id"] } == ["d6", "d1"])
        (_, json) = try server.json("GET", "/db/_design/app/_view/by_type?reduce=false&key=%22odd%22&startkey_docid=d3&endkey_docid=d5&update_seq=true")
        #expect(rows(json).map { $0["id"] } == ["d3", "d5"])
        #expect(sequenceNumber(json["update_seq"]) == 7)
        (status, json) = try server.json("POST", "/db/_design/app/_view/by_n/queries",
                                          body: #"{"queries":[{"reduce":false,"limit":1},{"keys":[2,3],"group":true}]}"#)
        #expect(status == 200)
        #expect(rows(json["results"]!.arrayValue![0]).count == 1)
        #expect(rows(json["results"]!.arrayValue![1]).map { $0["value"] } == [1, 1])
    }

    @Test func reducesGroupAndReportErrors() throws {
        let server = try server()
        defer { server.stop() }
        var (status, json) = try server.json("GET", "/db/_design/app/_view/by_type")
        #expect(status == 200)
        #expect(rows(json) == [try JSONValue.parse(#"{"key":null,"value":21}"#)])
        (_, json) = try server.json("GET", "/db/_design/app/_view/by_type?group=true")
        #expect(rows(json).map { $0["key"] } == ["even", "odd"])
        #expect(rows(json).map { $0["value"] } == [12, 9])
        (_, json) = try server.json("GET", "/db/_design/app/_view/by_n?startkey=2&endkey=5")
        #expect(rows(json).first?["value"] == 4)
        (_, json) = try server.json("GET", "/db/_design/app/_view/stats?group_level=1&startkey=%5B%22odd%22%5D")
        #expect(rows(json).count == 1)
        #expect(rows(json).first?["value"] == (try JSONValue.parse(#"{"sum":9,"count":3,"min":1,"max":5,"sumsqr":35}"#)))
        (_, json) = try server.json("GET", "/db/_design/app/_view/js?group=true")
        #expect(rows(json).map { $0["value"] } == [12, 9])

        (status, json) = try server.json("GET", "/db/_design/app/_view/throws?group=true")
        #expect(status == 400)
        #expect(json["error"] == "query_parse_error")
        #expect(json["reason"] == "Invalid use of grouping on a map view.")
        (status, json) = try server.json("GET", "/db/_design/app/_view/by_n?include_docs=true")
        #expect(json["reason"] == "`include_docs` is invalid for reduce")
        (status, json) = try server.json("POST", "/db/_design/app/_view/by_n", body: #"{"keys":[1]}"#)
        #expect(json["reason"] == "Multi-key fetchs for reduce views must use `group=true`")
        (status, json) = try server.json("GET", "/db/_design/app/_view/by_n?startkey=5&endkey=1")
        #expect(status == 400)
        #expect(json["reason"] == "No rows can match your key range, reverse your start_key and end_key or set descending=true")
        (status, json) = try server.json("GET", "/db/_design/app/_view/by_n?limit=-1")
        #expect(json["error"] == "query_parse_error")
        // Huge numbers are answered, not trapped on.
        (status, json) = try server.json("GET", "/db/_design/app/_view/by_n?reduce=false&startkey=1&skip=\(Int.max)&limit=\(Int.max)")
        #expect(status == 200)
        #expect(json["offset"] == 6)
        (status, json) = try server.json("GET", "/db/_design/app/_view/stats?group_level=\(Int.max)&skip=\(Int.max)")
        #expect(status == 200)
        (status, json) = try server.json("GET", "/db/_design/app/_view/nope")
        #expect(status == 404)
        #expect(json["reason"] == "missing_named_view")
        (status, _) = try server.json("GET", "/db/_design/none/_view/nope")
        #expect(status == 404)

        // _sum over a string: CouchDB's builtin_reduce_error.
        try server.put("db", "text", #"{"type":"odd","n":"seven"}"#)
        (status, json) = try server.json("GET", "/db/_design/app/_view/by_type")
        #expect(status == 500)
        #expect(json["error"] == "builtin_reduce_error")
    }

    /// CouchDB reads a built-in reduce by its prefix: `_sum` followed by a newline or other
    /// text is `_sum`; another name starting with `_` is refused when the design is saved.
    @Test func builtInReducesAreReadByTheirPrefix() throws {
        let server = try server()
        defer { server.stop() }
        let map = "function(doc) { if (doc.n !== undefined) emit(doc.n, doc.n); }"
        let trailing: JSONValue = ["views": [
            "sum": ["map": JSONValue(map), "reduce": "_sum\n// the total"],
            "count": ["map": JSONValue(map), "reduce": "_countorama"],
            "stats": ["map": JSONValue(map), "reduce": "_stats  \n "],
        ]]
        #expect(try server.json("PUT", "/db/_design/trailing", body: trailing.serializedString()).status == 201)
        #expect(rows(try server.json("GET", "/db/_design/trailing/_view/sum").json).first?["value"] == 21)
        #expect(rows(try server.json("GET", "/db/_design/trailing/_view/count").json).first?["value"] == 6)
        #expect(rows(try server.json("GET", "/db/_design/trailing/_view/stats").json).first?["value"]?["sumsqr"] == 91)
        let unknown: JSONValue = ["views": ["v": ["map": JSONValue(map), "reduce": "_median"]]]
        let (status, json) = try server.json("PUT", "/db/_design/unknown", body: unknown.serializedString())
        #expect(status == 400)
        #expect(json == ["error": "invalid_design_doc", "reason": "`_median` is not a supported reduce function."])
    }

    @Test func indexFollowsWritesDeletionsConflictsAndPurges() throws {
        let server = try server()
        defer { server.stop() }
        var (_, json) = try server.json("GET", "/db/_design/app/_view/throws")
        // The document whose map throws is left out; the others are there.
        #expect(rows(json).map { $0["id"] } == ["d1", "d2", "d4", "d5", "d6"])
        let revision = try server.json("GET", "/db/d1").json["_rev"]!.stringValue!
        try server.request("DELETE", "/db/d1?rev=\(revision)")
        let conflict = #"{"docs":[{"_id":"d2","_rev":"1-ffffffffffffffffffffffffffffffff","type":"even","n":2}],"new_edits":false}"#
        #expect(try server.json("POST", "/db/_bulk_docs", body: conflict).status == 201)
        try server.put("db", "d7", #"{"n":7}"#)
        (_, json) = try server.json("GET", "/db/_design/app/_view/throws")
        #expect(rows(json).map { $0["id"] } == ["d2", "d4", "d5", "d6", "d7"])
        // The map function sees `_conflicts` of a document that has them.
        #expect(rows(json).first?["value"]?.arrayValue?.count == 1)

        let d7 = try server.json("GET", "/db/d7").json["_rev"]!.stringValue!
        #expect(try server.json("POST", "/db/_purge", body: #"{"d7":["\#(d7)"]}"#).status == 201)
        (_, json) = try server.json("GET", "/db/_design/app/_view/throws")
        #expect(rows(json).map { $0["id"] } == ["d2", "d4", "d5", "d6"])
        (_, json) = try server.json("GET", "/db/_design/app/_info")
        #expect(json["name"] == "app")
        #expect(json["view_index"]?["purge_seq"] == 1)
        #expect(json["view_index"]?["signature"]?.stringValue?.count == 32)
    }

    @Test func changedFunctionsRebuildAndRestartsKeepTheIndex() throws {
        let directory = TestServer.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var server = try TestServer(directory: directory)
        try server.createDatabase("db")
        try server.put("db", "a", #"{"n":1}"#)
        let rev = try server.put("db", "_design/v", #"{"views":{"v":{"map":"function(doc) { emit(doc.n, 1); }"}}}"#)
        #expect(rows(try server.json("GET", "/db/_design/v/_view/v").json).map { $0["key"] } == [1])
        let files = { (try? FileManager.default.contentsOfDirectory(atPath: directory + "/db.views")) ?? [] }
        #expect(files().filter { $0.hasSuffix(".sqlite") }.count == 1)
        let indexed = try server.json("GET", "/db/_design/v/_info").json["view_index"]?["update_seq"]
        #expect(indexed == 2)
        server.stop(keepData: true)

        // After a restart the same index answers without being built again.
        server = try TestServer(directory: directory)
        #expect(try server.json("GET", "/db/_design/v/_info").json["view_index"]?["update_seq"] == indexed)
        #expect(rows(try server.json("GET", "/db/_design/v/_view/v?update=false").json).map { $0["key"] } == [1])
        // An identical design document shares the index.
        try server.put("db", "_design/copy", #"{"views":{"v":{"map":"function(doc) { emit(doc.n, 1); }"}}}"#)
        #expect(rows(try server.json("GET", "/db/_design/copy/_view/v").json).count == 1)
        #expect(files().filter { $0.hasSuffix(".sqlite") }.count == 1)
        // A changed function is a new index; cleanup removes the unused file.
        try server.put("db", "_design/v", #"{"_rev":"\#(rev)","views":{"v":{"map":"function(doc) { emit(-doc.n, 2); }"}}}"#)
        #expect(rows(try server.json("GET", "/db/_design/v/_view/v").json).map { $0["key"] } == [-1])
        #expect(files().filter { $0.hasSuffix(".sqlite") }.count == 2)
        try server.request("DELETE", "/db/_design/copy?rev=" + server.json("GET", "/db/_design/copy").json["_rev"]!.stringValue!)
        #expect(try server.json("POST", "/db/_view_cleanup", body: "{}").status == 202)
        #expect(files().filter { $0.hasSuffix(".sqlite") }.count == 1)
        #expect(try server.json("POST", "/db/_compact/v", body: "{}").status == 202)
        server.stop()
    }

    @Test func changesFilterByView() throws {
        let server = try server()
        defer { server.stop() }
        var (status, json) = try server.json("GET", "/db/_changes?filter=_view&view=app/by_type")
        #expect(status == 200)
        #expect(Set(json["results"]?.arrayValue?.compactMap { $0["id"]?.stringValue } ?? []) == Set((1...6).map { "d\($0)" }))
        (status, json) = try server.json("GET", "/db/_changes?filter=_view&view=app/missing")
        #expect(status == 404)
        #expect(json["reason"] == "missing json key: missing")
        (status, _) = try server.json("GET", "/db/_changes?filter=_view")
        #expect(status == 400)

        // Replication through a view: only the documents it emits for (odd `n`) are copied.
        try server.put("db", "_design/odd", #"{"views":{"odd":{"map":"function(doc) { if (doc.n % 2) emit(doc._id, null); }"}}}"#)
        (status, json) = try server.json("POST", "/_replicate", body: #"""
            {"source":"db","target":"copy","create_target":true,"filter":"_view","query_params":{"view":"odd/odd"}}
            """#)
        #expect(status == 200, "\(json.serializedString())")
        (_, json) = try server.json("GET", "/copy/_all_docs")
        #expect(rows(json).map { $0["id"] } == ["d1", "d3", "d5"])
    }

    @Test func collationOrdersMixedKeys() throws {
        let server = try TestServer()
        defer { server.stop() }
        try server.createDatabase("c")
        let keys = [#"null"#, #"false"#, #"true"#, #"1"#, #"2"#, #"3.0"#, #"4"#, #""a""#, #""A""#, #""aa""#, #""b""#, #""B""#,
                    #""ba""#, #""bb""#, #"["a"]"#, #"["b"]"#, #"["b","c"]"#, #"["b","c","a"]"#, #"["b","d"]"#,
                    #"["b","d","e"]"#, #"{"a":1}"#, #"{"a":2}"#, #"{"b":1}"#, #"{"b":2}"#, #"{"b":2,"a":1}"#, #"{"b":2,"c":2}"#]
        let documents = keys.enumerated().shuffled().map { #"{"_id":"k\#($0.offset)","k":\#($0.element)}"# }
        #expect(try server.json("POST", "/c/_bulk_docs", body: #"{"docs":[\#(documents.joined(separator: ","))]}"#).status == 201)
        try server.put("c", "_design/c", #"{"views":{"k":{"map":"function(doc) { emit(doc.k, null); }"}}}"#)
        let (_, json) = try server.json("GET", "/c/_design/c/_view/k")
        #expect(rows(json).map { $0["key"]! } == (try keys.map { try JSONValue.parse($0) }))
        let (_, reversed) = try server.json("GET", "/c/_design/c/_view/k?descending=true")
        #expect(rows(reversed).map { $0["id"]! } == rows(json).reversed().map { $0["id"]! })
    }

    @Test func queriesEndpointsAndUpdateModes() throws {
        let server = try server()
        defer { server.stop() }
        var (status, json) = try server.json("POST", "/db/_all_docs/queries",
                                              body: #"{"queries":[{"keys":["d2","d9"]},{"startkey":"d5","limit":1,"include_docs":true}]}"#)
        #expect(status == 200)
        let results = json["results"]?.arrayValue ?? []
        #expect(results.count == 2)
        #expect(rows(results[0]).map { $0["key"] } == ["d2", "d9"])
        #expect(rows(results[0]).last?["error"] == "not_found")
        #expect(rows(results[1]).map { $0["id"] } == ["d5"])
        #expect(rows(results[1]).first?["doc"]?["n"] == 5)
        (status, json) = try server.json("POST", "/db/_design_docs/queries", body: #"{"queries":[{}]}"#)
        #expect(rows(json["results"]!.arrayValue![0]).map { $0["id"] } == ["_design/app"])

        // update=false answers what the index holds; the next default query catches up.
        // (No background update may run in between, however slow the machine.)
        server.server.indexes.backgroundDelay = 3600
        #expect(rows(try server.json("GET", "/db/_design/app/_view/by_n?reduce=false").json).count == 6)
        try server.put("db", "d8", #"{"n":8,"type":"even"}"#)
        #expect(rows(try server.json("GET", "/db/_design/app/_view/by_n?reduce=false&update=false").json).count == 6)
        #expect(rows(try server.json("GET", "/db/_design/app/_view/by_n?reduce=false&stale=ok").json).count == 6)
        #expect(rows(try server.json("GET", "/db/_design/app/_view/by_n?reduce=false").json).count == 7)
        (status, json) = try server.json("GET", "/db/_design/app/_view/by_n?update=sometimes")
        #expect(status == 400)
        #expect(json["reason"] == "Invalid value for `update`.")

        // A value naming another document links it with include_docs.
        try server.put("db", "_design/link", #"{"views":{"l":{"map":"function(doc) { if (doc.n == 1) emit(doc.n, {_id: 'd2'}); }"}}}"#)
        (_, json) = try server.json("GET", "/db/_design/link/_view/l?include_docs=true")
        #expect(rows(json).first?["id"] == "d1")
        #expect(rows(json).first?["doc"]?["_id"] == "d2")
    }

    /// Each row's `doc` with `include_docs=true` is the document as `GET` answers it (with the
    /// same `conflicts` and `attachments`): IDs needing escapes, revisions not written as they
    /// are stored, a conflict, an attachment, values linking another document by `_id`, by `_id`
    /// and `_rev`, a missing one, and values only mentioning `_id`; `null` for a deleted link.
    @Test func rowsWithDocumentsAreTheDocumentsAsRead() throws {
        let server = try TestServer()
        defer { server.stop() }
        try server.createDatabase("db")
        let created = try server.json("POST", "/db/_bulk_docs", body: #"""
            {"new_edits":false,"docs":[
              {"_id":"plain","_rev":"2-0123456789abcdef0123456789abcdef","n":1},
              {"_id":"upper","_rev":"1-0123456789ABCDEF0123456789ABCDEF","n":2},
              {"_id":"text","_rev":"12-not-an-md5","n":3},
              {"_id":"q\"uo\\te\ttab","_rev":"1-a\"b","n":4},
              {"_id":"été ☃","_rev":"1-def","n":5},
              {"_id":"conflicted","_rev":"1-aaa","n":6},
              {"_id":"conflicted","_rev":"1-bbb","n":6}]}
            """#)
        #expect(created.status == 201)
        let linkedRev = try server.put("db", "linked", #"{"n":7,"link":"plain"}"#)
        _ = try server.put("db", "pinned", #"{"n":8,"link":"linked","rev":"\#(linkedRev)"}"#)
        _ = try server.put("db", "dangling", #"{"n":9,"link":"nowhere"}"#)
        _ = try server.put("db", "mentions", #"{"n":10,"note":"_id"}"#)
        let goneRev = try server.put("db", "gone", #"{"x":1}"#)
        _ = try server.put("db", "to-gone", #"{"n":11,"link":"gone"}"#)
        _ = try server.json("DELETE", "/db/gone?rev=\(goneRev)")
        #expect(try server.request("PUT", "/db/attached/file.txt", headers: [("Content-Type", "text/plain")],
                                   body: "hello").status == 201)
        let attachedRev = try #require(try server.json("GET", "/db/attached").json["_rev"]?.stringValue)
        _ = try server.put("db", "attached", #"{"_rev":"\#(attachedRev)","n":12,"_attachments":{"file.txt":{"stub":true}}}"#)
        try server.put("db", "_design/app", #"""
            {"views":{"all":{"map":"function(doc) { if (doc.n === undefined) return; if (doc.rev) emit(doc.n, {_id: doc.link, _rev: doc.rev}); else if (doc.link) emit(doc.n, {_id: doc.link}); else if (doc.note) emit(doc.n, {note: doc.note}); else emit(doc.n, doc.n); }"}}}
            """#)

        for query in ["", "&descending=true", "&conflicts=true", "&attachments=true", "&limit=3&skip=2"] {
            let listing = try server.json("GET", "/db/_design/app/_view/all?include_docs=true\(query)").json
            let listed = rows(listing)
            #expect(listed.count == (query.contains("limit") ? 3 : 12), "\(query)")
            for row in listed {
                let id = try #require(row["id"]?.stringValue)
                var linked = id
                var at = ""
                if case .object(let value)? = row["value"], let target = value["_id"]?.stringValue {
                    linked = target
                    at = value["_rev"]?.stringValue.map { "rev=\($0)" } ?? ""
                }
                let options = [at, query.contains("conflicts") ? "conflicts=true" : "",
                               query.contains("attachments") ? "attachments=true" : ""].filter { !$0.isEmpty }
                let path = "/db/" + linked.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
                    + (options.isEmpty ? "" : "?" + options.joined(separator: "&"))
                let read = try server.json("GET", path)
                if read.status == 200 {
                    #expect(row["doc"] == read.json, "\(query) \(id)")
                } else {
                    #expect(row["doc"] == .null, "\(query) \(id)")
                }
            }
        }
        let all = rows(try server.json("GET", "/db/_design/app/_view/all?include_docs=true").json)
        #expect(all.first { $0["id"] == "to-gone" }?["doc"] == .null)
        #expect(all.first { $0["id"] == "dangling" }?["doc"] == .null)
        #expect(all.first { $0["id"] == "pinned" }?["doc"]?["_rev"] == JSONValue(linkedRev))
        #expect(all.first { $0["id"] == "linked" }?["doc"]?["_id"] == "plain")
        #expect(all.first { $0["id"] == "mentions" }?["doc"]?["_id"] == "mentions")
        #expect(all.first { $0["id"] == "conflicted" }?["doc"]?["_conflicts"] == nil)
    }

    /// A view queried once is brought up to date after later writes without being queried.
    @Test func queriedViewsUpdateInTheBackground() throws {
        let server = try server()
        defer { server.stop() }
        #expect(rows(try server.json("GET", "/db/_design/app/_view/by_n?reduce=false").json).count == 6)
        try server.put("db", "d9", #"{"n":9}"#)
        let target = try server.json("GET", "/db").json["update_seq"].flatMap(sequenceNumber)
        let deadline = Date().addingTimeInterval(60)
        var indexed: Int?
        repeat {
            indexed = try server.json("GET", "/db/_design/app/_info").json["view_index"]?["update_seq"]?.intValue
            if indexed == target { break }
            Thread.sleep(forTimeInterval: 0.1)
        } while Date() < deadline
        #expect(indexed == target)
        #expect(rows(try server.json("GET", "/db/_design/app/_view/by_n?reduce=false&update=false").json).count == 7)
    }

    /// `_sum` over arrays and objects, `_approx_count_distinct`, `_count` by group level,
    /// and the `include_design` and `local_seq` options.
    @Test func builtInReducesOverStructuredValuesAndOptions() throws {
        let server = try TestServer()
        defer { server.stop() }
        try server.createDatabase("r")
        let documents = [#"{"_id":"a","k":["x",1],"v":[1,2],"o":{"p":1,"q":{"r":2}}}"#,
                         #"{"_id":"b","k":["x",2],"v":[3],"o":{"p":2}}"#,
                         #"{"_id":"c","k":["y",1],"v":[0,0,5],"o":{"q":{"r":3}}}"#]
        #expect(try server.json("POST", "/r/_bulk_docs", body: #"{"docs":[\#(documents.joined(separator: ","))]}"#).status == 201)
        try server.put("r", "_design/r", #"""
            {"options": {"include_design": true, "local_seq": true}, "views": {
              "arrays": {"map": "function(doc) { if (doc.v) emit(doc.k, doc.v); }", "reduce": "_sum"},
              "objects": {"map": "function(doc) { if (doc.o) emit(doc._id, doc.o); }", "reduce": "_sum"},
              "distinct": {"map": "function(doc) { if (doc.k) { emit(doc.k[0], null); } }", "reduce": "_approx_count_distinct"},
              "count": {"map": "function(doc) { if (doc.k) emit(doc.k, null); }", "reduce": "_count"},
              "all": {"map": "function(doc) { emit(doc._id, doc._local_seq); }"}}}
            """#)
        var (_, json) = try server.json("GET", "/r/_design/r/_view/arrays")
        #expect(rows(json).first?["value"] == [4, 2, 5])
        (_, json) = try server.json("GET", "/r/_design/r/_view/objects")
        #expect(rows(json).first?["value"] == (try JSONValue.parse(#"{"p":3,"q":{"r":5}}"#)))
        (_, json) = try server.json("GET", "/r/_design/r/_view/distinct")
        #expect(rows(json).first?["value"] == 2)
        (_, json) = try server.json("GET", "/r/_design/r/_view/count?group_level=1")
        #expect(rows(json).map { $0["key"] } == [["x"], ["y"]])
        #expect(rows(json).map { $0["value"] } == [2, 1])
        (_, json) = try server.json("GET", "/r/_design/r/_view/all")
        #expect(rows(json).map { $0["id"] } == ["_design/r", "a", "b", "c"])
        #expect(rows(json).dropFirst().map { $0["value"] } == [1, 2, 3])
    }
}
