import CouchCore
import CouchTestSupport
import Foundation
import Testing

/// `_index` and `_explain` over real HTTP: the design documents CouchDB writes, the list
/// with `_all_docs`, deletion and the fallback it leaves, partial indexes, `use_index`.
@Suite struct MangoIndexTests {
    @Test func indexesAreStoredAsCouchDBStoresThemAndListed() throws {
        let fixture = try MangoFixture()
        defer { fixture.server.stop() }
        let created = try fixture.createIndex(#"{"index": {"fields": ["n", {"age": "asc"}]}, "name": "n-age", "ddoc": "queries"}"#)
        #expect(created == ["result": "created", "id": "_design/queries", "name": "n-age"])
        #expect(try fixture.createIndex(#"{"index": {"fields": ["n", {"age": "asc"}]}, "name": "n-age", "ddoc": "queries"}"#)
                == ["result": "exists", "id": "_design/queries", "name": "n-age"])
        let generated = try fixture.createIndex(#"{"index": {"fields": ["kind"]}}"#)
        let generatedID = try #require(generated["id"]?.stringValue)
        #expect(generatedID.hasPrefix("_design/") && generatedID.count == 48)
        #expect(generated["name"]?.stringValue == String(generatedID.dropFirst(8)))

        let ddoc = try fixture.server.json("GET", "/db/_design/queries").json
        #expect(ddoc["language"] == "query")
        let view = try #require(ddoc["views"]?["n-age"])
        #expect(view["map"] == ["fields": ["n": "asc", "age": "asc"], "partial_filter_selector": [:]])
        #expect(view["reduce"] == "_count")
        #expect(view["options"] == ["def": ["fields": ["n", ["age": "asc"]]]])

        let (status, list) = try fixture.server.json("GET", "/db/_index")
        #expect(status == 200)
        #expect(list["total_rows"] == 3)
        let indexes = try #require(list["indexes"]?.arrayValue)
        #expect(indexes[0] == ["ddoc": nil, "name": "_all_docs", "type": "special", "def": ["fields": [["_id": "asc"]]]])
        let queries = try #require(indexes.first { $0["ddoc"] == "_design/queries" })
        #expect(queries == ["ddoc": "_design/queries", "name": "n-age", "type": "json", "partitioned": false,
                            "def": ["fields": [["n": "asc"], ["age": "asc"]]]])
        #expect(try fixture.server.json("GET", "/db/_index?limit=1&skip=1").json["indexes"]?.arrayValue?.count == 1)
        #expect(try fixture.server.json("GET", "/db/_index?limit=0").status == 500)

        // A design document of JavaScript is not one Mango may add to.
        try fixture.server.put("db", "_design/js", #"{"views": {"v": {"map": "function(doc) {}"}}}"#)
        let refused = try fixture.server.json("POST", "/db/_index", body: #"{"index": {"fields": ["n"]}, "ddoc": "js"}"#)
        #expect(refused.status == 400)
        #expect(refused.json["error"] == "invalid_ddoc_lang")
        for (body, error) in [(#"{"index": {"fields": ["n"]}, "type": "geo"}"#, "invalid_index"),
                              (#"{"index": {}}"#, "missing_required_key"), (#"{"fields": ["n"]}"#, "missing_required_key"),
                              (#"{"index": {"fields": ["n"]}, "colour": 1}"#, "invalid_key"),
                              (#"{"index": {"fields": ["n"]}, "ddoc": ""}"#, "illegal_docid")] {
            let answer = try fixture.server.json("POST", "/db/_index", body: body)
            #expect(answer.status == 400, "\(body)")
            #expect(answer.json["error"]?.stringValue == error, "\(body)")
        }
    }

    @Test func explainNamesTheIndexAndItsCandidates() throws {
        let fixture = try MangoFixture()
        defer { fixture.server.stop() }
        _ = try fixture.createIndex(#"{"index": {"fields": ["n"]}, "name": "by-n", "ddoc": "n"}"#)
        _ = try fixture.createIndex(#"{"index": {"fields": ["n", "age"]}, "name": "by-n-age", "ddoc": "n2"}"#)
        let (status, explained) = try fixture.server.json("POST", "/db/_explain", body: #"""
            {"selector": {"n": {"$gt": 2}}, "fields": ["_id", "n"], "limit": 2}
            """#)
        #expect(status == 200)
        #expect(explained["dbname"] == "db")
        #expect(explained["index"]?["name"] == "by-n")
        #expect(explained["selector"] == ["n": ["$gt": 2]])
        #expect(explained["limit"] == 2 && explained["skip"] == 0)
        #expect(explained["fields"] == ["_id", "n"])
        #expect(explained["opts"]?["bookmark"] == "nil")
        #expect(explained["mrargs"]?["start_key"] == [2])
        #expect(explained["mrargs"]?["end_key"] == ["<MAX>"])
        #expect(explained["mrargs"]?["direction"] == "fwd")
        #expect(explained["covering"] == true)
        let candidates = try #require(explained["index_candidates"]?.arrayValue)
        #expect(candidates.count == 2)
        let allDocs = try #require(candidates.first { $0["index"]?["name"] == "_all_docs" })
        #expect(allDocs["analysis"] == ["usable": true, "reasons": [["name": "unfavored_type"]], "ranking": 1, "covering": nil])
        let wider = try #require(candidates.first { $0["index"]?["name"] == "by-n-age" })
        // `age` is a column the selector does not require: documents without it are not in that index.
        #expect(wider["analysis"]?["reasons"] == [["name": "field_mismatch"]])
        #expect(wider["analysis"]?["usable"] == false)
        #expect(explained["selector_hints"] == [["type": "json", "indexable_fields": ["n"], "unindexable_fields": []]])

        // Descending sorts scan backwards; an index that cannot serve the sort says why.
        let backwards = try fixture.server.json("POST", "/db/_explain", body: #"{"selector": {"n": 3}, "sort": [{"n": "desc"}]}"#).json
        #expect(backwards["mrargs"]?["direction"] == "rev")
        #expect(backwards["mrargs"]?["start_key"] == [3, "<MAX>"])
        #expect(backwards["mrargs"]?["end_key"] == [3])
        let special = try fixture.server.json("POST", "/db/_explain", body: #"{"selector": {"kind": "odd"}}"#).json
        #expect(special["index"]?["name"] == "_all_docs")
        #expect(special["mrargs"]?["start_key"] == .null && special["mrargs"]?["end_key"] == "<MAX>")
        // Two usable JSON indexes: the one with fewer columns wins, the other is ranked after it.
        let both = try fixture.server.json("POST", "/db/_explain", body: #"{"selector": {"n": {"$gt": 2}, "age": 30}}"#).json
        #expect(both["index"]?["name"] == "by-n-age")
        let narrower = (both["index_candidates"]?.arrayValue ?? []).first { $0["index"]?["name"] == "by-n" }
        #expect(narrower?["analysis"]?["reasons"] == [["name": "less_overlap"]])
        #expect(narrower?["analysis"]?["ranking"] == 1)
        let reasons = (special["index_candidates"]?.arrayValue ?? []).map { $0["analysis"]?["reasons"] }
        #expect(reasons.allSatisfy { $0 == [["name": "field_mismatch"]] } && reasons.count == 2)
    }

    @Test func deletingAnIndexFallsBackWithAWarning() throws {
        let fixture = try MangoFixture()
        defer { fixture.server.stop() }
        _ = try fixture.createIndex(#"{"index": {"fields": ["age"]}, "name": "by-age", "ddoc": "ages"}"#)
        _ = try fixture.createIndex(#"{"index": {"fields": ["kind"]}, "name": "by-kind", "ddoc": "ages"}"#)
        let query = #"{"selector": {"age": {"$gte": 40}}, "limit": 1000}"#
        let before = try fixture.find(query).json
        #expect(before["warning"] == nil)
        let indexed = (before["docs"]?.arrayValue ?? []).compactMap { $0["_id"]?.stringValue }
        #expect(!indexed.isEmpty)

        #expect(try fixture.server.json("DELETE", "/db/_index/_design/ages/json/missing").status == 404)
        #expect(try fixture.server.json("DELETE", "/db/_index/ages/json/by-age").json == ["ok": true])
        #expect(try fixture.server.json("DELETE", "/db/_index/ages/json/by-age").status == 404)
        let after = try fixture.find(query).json
        #expect(after["warning"] == "No matching index found, create an index to optimize query time.")
        #expect((after["docs"]?.arrayValue ?? []).compactMap { $0["_id"]?.stringValue } == indexed.sorted())
        // The other index keeps the design document; removing it too deletes the document.
        #expect(try fixture.server.json("GET", "/db/_design/ages").json["views"]?["by-kind"] != nil)
        #expect(try fixture.server.json("DELETE", "/db/_index/_design/ages/json/by-kind").json == ["ok": true])
        #expect(try fixture.server.json("GET", "/db/_design/ages").status == 404)

        // use_index naming an index that cannot serve the query: CouchDB's warning, and the right rows.
        _ = try fixture.createIndex(#"{"index": {"fields": ["name"]}, "name": "by-name", "ddoc": "names"}"#)
        let hinted = try fixture.find(#"{"selector": {"age": 30}, "use_index": ["names", "by-name"], "limit": 1000}"#).json
        #expect(hinted["warning"]?.stringValue?.hasPrefix("_design/names, by-name was not used because it is not a valid index for this query.") == true)
        #expect((hinted["docs"]?.arrayValue ?? []).count == fixture.documents.values.filter { $0["age"] == 30 }.count)
    }

    @Test func partialIndexesHoldOnlyWhatTheirFilterAccepts() throws {
        let fixture = try MangoFixture()
        defer { fixture.server.stop() }
        _ = try fixture.createIndex(#"""
            {"index": {"fields": ["age"], "partial_filter_selector": {"kind": "odd"}}, "name": "odd-ages", "ddoc": "partial"}
            """#)
        let ddoc = try fixture.server.json("GET", "/db/_design/partial").json
        #expect(ddoc["views"]?["odd-ages"]?["map"]?["partial_filter_selector"] == ["kind": ["$eq": "odd"]])
        // Not chosen unless named: the query may ask for documents the filter excludes.
        let unnamed = try fixture.find(#"{"selector": {"age": {"$gt": 0}}, "limit": 1000}"#).json
        #expect(unnamed["warning"] != nil)
        #expect(unnamed["docs"]?.arrayValue?.count == fixture.documents.count)
        let named = try fixture.find(#"{"selector": {"age": {"$gt": 0}}, "use_index": "partial", "limit": 1000}"#).json
        #expect(named["warning"] == nil)
        let ids = (named["docs"]?.arrayValue ?? []).compactMap { $0["_id"]?.stringValue }
        #expect(Set(ids) == Set(fixture.documents.filter { $0.value["kind"] == "odd" }.keys))
        let explained = try fixture.server.json("POST", "/db/_explain", body: #"{"selector": {"age": {"$gt": 0}}}"#).json
        let partial = (explained["index_candidates"]?.arrayValue ?? []).first { $0["index"]?["name"] == "odd-ages" }
        #expect(partial?["analysis"]?["reasons"] == [["name": "is_partial"]])
    }

    @Test func indexesFollowLaterWrites() throws {
        let fixture = try MangoFixture()
        defer { fixture.server.stop() }
        _ = try fixture.createIndex(#"{"index": {"fields": ["score"]}, "name": "score", "ddoc": "score"}"#)
        #expect(try fixture.ids(#"{"selector": {"score": {"$gt": 0}}}"#).isEmpty)
        let rev = try fixture.server.put("db", "s1", #"{"score": 5}"#)
        try fixture.server.put("db", "s2", #"{"score": 7}"#)
        #expect(try fixture.ids(#"{"selector": {"score": {"$gt": 0}}}"#) == ["s1", "s2"])
        try fixture.server.put("db", "s1", #"{"_rev": "\#(rev)", "score": 9}"#)
        #expect(try fixture.ids(#"{"selector": {"score": {"$gt": 0}}}"#) == ["s2", "s1"])
        #expect(try fixture.ids(#"{"selector": {"score": {"$gt": 0}}, "update": false}"#).count == 2)
    }
}
