import CouchCore
import CouchTestSupport
import Foundation
import Testing

/// View behaviours CouchDB's own HTTP suite checks, over real HTTP: the raw collation
/// option, `_info`'s collator versions and sizes, parameters of a POST, `keys` with other
/// parameters, `include_docs` with an emitted `_rev`, `reduce_limit`.
@Suite struct ViewQueryCompatibilityTests {
    private func rows(_ json: JSONValue) -> [JSONValue] { json["rows"]?.arrayValue ?? [] }

    private func bulk(_ server: TestServer, _ database: String, _ documents: [String]) throws {
        let (status, _) = try server.json("POST", "/\(database)/_bulk_docs", body: #"{"docs":[\#(documents.joined(separator: ","))]}"#)
        #expect(status == 201)
    }

    /// The keys of CouchDB's view_collation_raw test, in raw (Erlang term) order.
    static let rawOrder = #"""
        [1, 2, 3, 4, false, null, true, {"a":1}, {"a":2}, {"b":1}, {"b":2}, {"b":2,"a":1}, {"b":2,"c":2},
         ["a"], ["b"], ["b","c"], ["b","c","a"], ["b","d"], ["b","d","e"], "A", "B", "a", "aa", "b", "ba", "bb"]
        """#

    @Test func rawCollationOrdersKeysInErlangTermOrder() throws {
        let server = try TestServer()
        defer { server.stop() }
        try server.createDatabase("raw")
        let values = try JSONValue.parse(Self.rawOrder).arrayValue!
        // Written in reverse so that the order comes from the index, not from the documents.
        try bulk(server, "raw", values.enumerated().reversed().map { #"{"_id":"\#($0.offset + 1)","foo":\#($0.element.serializedString())}"# })
        _ = try server.put("raw", "_design/test", #"""
            {"views": {
              "raw": {"map": "function(doc) { emit(doc.foo, 1); }", "reduce": "_count", "options": {"collation": "raw"}},
              "icu": {"map": "function(doc) { emit(doc.foo, 1); }"}}}
            """#)
        var (status, json) = try server.json("GET", "/raw/_design/test/_view/raw?reduce=false")
        #expect(status == 200)
        #expect(rows(json).map { $0["key"]! } == values)
        (_, json) = try server.json("GET", "/raw/_design/test/_view/raw?reduce=false&descending=true")
        #expect(rows(json).map { $0["key"]! } == values.reversed())
        // "Z" < "a" byte-wise (ICU orders them the other way: this range would be refused).
        (status, json) = try server.json("GET", "/raw/_design/test/_view/raw?reduce=false&startkey=%22Z%22&endkey=%22a%22")
        #expect(status == 200)
        #expect(rows(json).map { $0["key"]! } == ["a"])
        (_, json) = try server.json("GET", "/raw/_design/test/_view/raw?reduce=false&endkey=%22b%22&inclusive_end=false")
        #expect(rows(json).last?["key"] == "aa")
        (_, json) = try server.json("GET", "/raw/_design/test/_view/raw?reduce=false&endkey=%22b%22&inclusive_end=false&descending=true")
        #expect(rows(json).last?["key"] == "ba")
        (_, json) = try server.json("GET", "/raw/_design/test/_view/raw?reduce=false&key=%7B%22b%22%3A2%2C%22a%22%3A1%7D")
        #expect(rows(json).map { $0["id"]! } == ["12"])
        // The stored reductions follow the view's order: groups in raw order, ranges by it.
        (_, json) = try server.json("GET", "/raw/_design/test/_view/raw?group=true&limit=8")
        #expect(rows(json).map { $0["key"]! } == Array(values.prefix(8)))
        (_, json) = try server.json("GET", "/raw/_design/test/_view/raw?startkey=%22B%22&endkey=%22b%22")
        #expect(rows(json).first?["value"] == 4)
        // Another view of the same design document keeps CouchDB's collation.
        (_, json) = try server.json("GET", "/raw/_design/test/_view/icu?limit=3")
        #expect(rows(json).map { $0["key"]! } == [.null, false, true])
    }

    @Test func infoListsCollatorVersionsAndDataSmallerThanFile() throws {
        let server = try TestServer()
        defer { server.stop() }
        try server.createDatabase("info")
        _ = try server.put("info", "_design/d", #"{"views":{"v":{"map":"function(doc) { emit(doc.n, doc.text); }", "reduce": "_count"}}}"#)
        // Looking (`_info`) and `update=false` queries leave an index never built as it is.
        let fresh = try server.json("GET", "/info/_design/d/_info").json["view_index"]?["sizes"]?["file"]
        try bulk(server, "info", (0..<50).map { #"{"_id":"early-\#($0)","n":\#($0)}"# })
        #expect(try server.json("GET", "/info/_design/d/_view/v?update=false").json == ["rows": []])
        Thread.sleep(forTimeInterval: 1.5)
        #expect(try server.json("GET", "/info/_design/d/_info").json["view_index"]?["sizes"]?["file"] == fresh)
        for round in 0..<3 {
            let text = String(repeating: "x", count: 200 + round)
            try bulk(server, "info", (0..<300).map { #"{"_id":"r\#(round)-\#($0)","n":\#($0),"text":"\#(text)"}"# })
            _ = try server.json("GET", "/info/_design/d/_view/v?reduce=false&limit=1")
        }
        var (status, json) = try server.json("GET", "/info/_design/d/_info")
        #expect(status == 200)
        let versions = json["view_index"]?["collator_versions"]?.arrayValue ?? []
        #expect(versions.count == 1)
        #expect(versions.first?.stringValue?.isEmpty == false)
        let fileBefore = json["view_index"]?["sizes"]?["file"]?.intValue ?? 0
        let activeBefore = json["view_index"]?["sizes"]?["active"]?.intValue ?? 0
        #expect(activeBefore > 0 && activeBefore < fileBefore)
        (status, _) = try server.json("POST", "/info/_compact/d", headers: [("Content-Type", "application/json")])
        #expect(status == 202)
        var fileAfter = fileBefore, activeAfter = 0
        for _ in 0..<100 {
            (_, json) = try server.json("GET", "/info/_design/d/_info")
            fileAfter = json["view_index"]?["sizes"]?["file"]?.intValue ?? 0
            activeAfter = json["view_index"]?["sizes"]?["active"]?.intValue ?? 0
            if fileAfter < fileBefore { break }
            Thread.sleep(forTimeInterval: 0.05)
        }
        #expect(fileAfter < fileBefore)
        #expect(activeAfter > 0 && activeAfter < fileAfter)
    }

    @Test func postParametersKeysAndLinkedRevisions() throws {
        let server = try TestServer()
        defer { server.stop() }
        try server.createDatabase("q")
        try bulk(server, "q", (0..<30).map { #"{"_id":"\#($0)","integer":\#($0)}"# })
        _ = try server.put("q", "_design/test", #"""
            {"views": {
              "multi": {"map": "function(doc) { for (var i = 0; i < 3; i++) emit(i, doc.integer); }"},
              "with_prev": {"map": "function(doc) { emit(doc._id, {'_rev': doc.prev || doc._rev}); }"}}}
            """#)
        // The query string's parameter wins over the body's.
        var (status, json) = try server.json("POST", "/q/_design/test/_view/multi?limit=1", body: #"{"keys":[0,1],"limit":2}"#)
        #expect(status == 200)
        #expect(rows(json).count == 1)
        (status, json) = try server.json("POST", "/q/_design/test/_view/multi", body: #"{"keys":1}"#)
        #expect(status == 400)
        #expect(json["error"] == "bad_request")
        #expect(json["reason"] == "`keys` member must be an array.")
        // startkey_docid/endkey_docid bound each key's rows.
        (_, json) = try server.json("POST", "/q/_design/test/_view/multi?startkey_docid=21&endkey_docid=23", body: #"{"keys":[0,2]}"#)
        #expect(rows(json).map { $0["key"]! } == [0, 0, 0, 2, 2, 2])
        #expect(rows(json).map { $0["value"]! } == [21, 22, 23, 21, 22, 23])
        (_, json) = try server.json("GET", "/q/_design/test/_view/multi?keys=%5B1%5D&skip=1&limit=5&startkey_docid=28&endkey_docid=26&descending=true")
        #expect(rows(json).map { $0["value"]! } == [27, 26])

        // An emitted `{"_rev"}` links the row to that revision of its own document.
        (_, json) = try server.json("GET", "/q/0")
        let first = json["_rev"]!.stringValue!
        (status, _) = try server.json("PUT", "/q/0", body: #"{"_rev":"\#(first)","integer":100,"prev":"\#(first)"}"#)
        #expect(status == 201)
        (_, json) = try server.json("GET", "/q/_design/test/_view/with_prev?key=%220%22&include_docs=true")
        let doc = rows(json).first?["doc"]
        #expect(doc?["_rev"]?.stringValue == first)
        #expect(doc?["integer"] == 0)
        #expect(doc?["prev"] == nil)
    }

    @Test func reduceOutputThatGrowsTooFastIsAnOverflowRow() throws {
        let server = try TestServer()
        defer { server.stop() }
        try server.createDatabase("big")
        try bulk(server, "big", (0..<3).map { #"{"_id":"\#($0)","integer":\#($0)}"# })
        _ = try server.put("big", "_design/big", #"""
            {"views": {"too_big": {"map": "function(doc) { emit(doc.integer, doc.integer); }",
              "reduce": "function(keys, values) { var chars = []; for (var i = 0; i < 1000; i++) chars.push('wazzap'); return chars; }"}}}
            """#)
        let (status, json) = try server.json("GET", "/big/_design/big/_view/too_big")
        #expect(status == 200)
        let row = rows(json).first
        #expect(row?["error"] == "reduce_overflow_error")
        #expect(row?["key"] == .null)
        #expect(row?["reason"]?.stringValue?.hasPrefix("Reduce output must shrink more rapidly") == true)
    }
}
