import CouchCore
import CouchTestSupport
import Foundation
import Testing

/// `_find` over real HTTP: every operator answers the same rows through a JSON index as
/// through the `_all_docs` fallback; sorting, paging, fields, warnings and errors.
@Suite struct MangoFindTests {
    static let selectors: [String] = [
        #"{"n": 5}"#, #"{"n": {"$gt": 3}}"#, #"{"n": {"$gte": 3, "$lt": 10}}"#, #"{"n": {"$lte": "b"}}"#,
        #"{"n": {"$in": [1, "a", null, true, 7]}}"#, #"{"n": {"$in": []}}"#, #"{"n": {"$ne": 4}}"#,
        #"{"n": {"$exists": true}}"#, #"{"n": {"$type": "string"}}"#, #"{"n": {"$gt": null}}"#,
        #"{"n": {"$eq": [1, 2]}}"#, #"{"n": {"$size": 2}}"#, #"{"n": {"$all": ["a"]}}"#,
        #"{"n": {"$elemMatch": {"$gt": 1}}}"#, #"{"n": {"$regex": "^a"}}"#, #"{"n": {"$mod": [2, 0]}}"#,
        #"{"n": {"$nin": [1, 2, "a"]}}"#, #"{"$and": [{"n": {"$gt": 1}}, {"n": {"$lt": 8}}]}"#,
        #"{"n": {"$gt": 2}, "age": {"$lt": 40}}"#, #"{"$or": [{"n": 1}, {"n": "b"}]}"#,
        #"{"n": {"$beginsWith": "a"}}"#, #"{"n": {"$gt": 10, "$lt": 5}}"#, #"{"n": {"$lt": {}}}"#,
        #"{"n": {"$gte": []}}"#, #"{"n": {"$not": {"$gt": 2}}}"#, #"{"n": {"$in": [2, 3]}, "kind": "odd"}"#,
        #"{"age": {"$gte": 30}, "name": {"$gt": "c"}}"#, #"{"age": 30, "name": {"$exists": true}}"#,
        #"{"age": {"$in": [30, 40]}, "name": {"$gt": ""}}"#, #"{"address.city": "Oslo", "n": {"$gt": 0}}"#,
        #"{"tags": {"$elemMatch": {"$eq": "green"}}, "n": {"$exists": true}}"#,
    ]

    @Test func everyOperatorAnswersTheSameRowsThroughAnIndexAndTheFallback() throws {
        let fixture = try MangoFixture()
        defer { fixture.server.stop() }
        var fallback: [String: [String]] = [:]
        for selector in Self.selectors {
            let (status, json) = try fixture.find(#"{"selector": \#(selector), "limit": 1000}"#)
            #expect(status == 200, "\(selector)")
            #expect(json["warning"]?.stringValue?.contains("No matching index found") == true, "\(selector)")
            fallback[selector] = (json["docs"]?.arrayValue ?? []).compactMap { $0["_id"]?.stringValue }
        }
        // The fallback's answers are the matcher's: spot-check one against the data itself.
        let expectedGreater = fixture.documents.filter { _, doc in
            doc["n"].map { MangoCollation.compare($0, 3) > 0 } ?? false
        }.keys.sorted()
        #expect(fallback[#"{"n": {"$gt": 3}}"#] == expectedGreater)

        _ = try fixture.createIndex(#"{"index": {"fields": ["n"]}, "name": "by-n", "ddoc": "n"}"#)
        _ = try fixture.createIndex(#"{"index": {"fields": ["age", "name"]}, "name": "age-name", "ddoc": "age"}"#)
        var indexed = 0
        for selector in Self.selectors {
            let (status, json) = try fixture.find(#"{"selector": \#(selector), "limit": 1000}"#)
            #expect(status == 200, "\(selector)")
            let ids = (json["docs"]?.arrayValue ?? []).compactMap { $0["_id"]?.stringValue }
            #expect(ids.sorted() == fallback[selector], "\(selector)")
            #expect(Set(ids).count == ids.count, "duplicates for \(selector)")
            let explained = try fixture.server.json("POST", "/db/_explain", body: #"{"selector": \#(selector)}"#).json
            if explained["index"]?["type"] == "json" { indexed += 1 }
        }
        // Most selectors went through an index: the comparison is not vacuous.
        #expect(indexed >= 25)
    }

    @Test func sortedQueriesFollowTheIndexOrderAndPagesWalkEveryRowOnce() throws {
        let fixture = try MangoFixture()
        defer { fixture.server.stop() }
        let sortError = try fixture.find(#"{"selector": {"n": {"$gt": null}}, "sort": ["n"]}"#)
        #expect(sortError.status == 400)
        #expect(sortError.json == ["error": "no_usable_index", "reason": "No index exists for this sort, try indexing by the sort fields."])
        _ = try fixture.createIndex(#"{"index": {"fields": ["n"]}}"#)

        // Expected order: keys by CouchDB collation, ties by document ID.
        let withN = fixture.documents.filter { $0.value["n"] != nil }
        let expected = withN.keys.sorted { a, b in
            let c = MangoCollation.compare(withN[a]!["n"]!, withN[b]!["n"]!)
            return c != 0 ? c < 0 : a < b
        }
        for descending in [false, true] {
            let sort = descending ? #"[{"n": "desc"}]"# : #"["n"]"#
            let all = try fixture.ids(#"{"selector": {"n": {"$exists": true}}, "sort": \#(sort), "limit": 1000}"#)
            #expect(all == (descending ? expected.reversed() : expected))
            var paged: [String] = []
            var bookmark: String?
            for _ in 0..<50 {
                let mark = bookmark.map { #", "bookmark": "\#($0)""# } ?? ""
                let page = try fixture.find(#"{"selector": {"n": {"$exists": true}}, "sort": \#(sort), "limit": 4\#(mark)}"#).json
                let ids = (page["docs"]?.arrayValue ?? []).compactMap { $0["_id"]?.stringValue }
                if ids.isEmpty { break }
                paged += ids
                bookmark = page["bookmark"]?.stringValue
            }
            #expect(paged == all)
        }
        // The fallback pages through _all_docs in ID order.
        var paged: [String] = []
        var bookmark: String?
        for _ in 0..<50 {
            let mark = bookmark.map { #", "bookmark": "\#($0)""# } ?? ""
            let page = try fixture.find(#"{"selector": {"kind": {"$ne": "none"}}, "limit": 5\#(mark)}"#).json
            let ids = (page["docs"]?.arrayValue ?? []).compactMap { $0["_id"]?.stringValue }
            if ids.isEmpty {
                #expect(page["bookmark"] == "nil")
                break
            }
            paged += ids
            bookmark = page["bookmark"]?.stringValue
        }
        #expect(paged == fixture.documents.keys.sorted())
    }

    @Test func fieldsSkipLimitAndExecutionStats() throws {
        let fixture = try MangoFixture()
        defer { fixture.server.stop() }
        let (status, json) = try fixture.find(#"""
            {"selector": {"age": {"$gt": 0}}, "fields": ["_id", "address.city", "name", "nothing.here"],
             "skip": 2, "limit": 3, "execution_stats": true}
            """#)
        #expect(status == 200)
        let docs = try #require(json["docs"]?.arrayValue)
        let all = fixture.documents.keys.sorted()
        #expect(docs.map { $0["_id"]?.stringValue } == Array(all[2..<5]))
        let first = docs[0]
        #expect(first.objectValue?.keys.first == "_id")
        #expect(first["address"] == ["city": fixture.documents[all[2]]!["address"]!["city"]!])
        #expect(first["nothing"] == nil && first["_rev"] == nil && first["n"] == nil)
        let stats = try #require(json["execution_stats"])
        #expect(stats["results_returned"] == 3)
        #expect(stats["total_docs_examined"] == 5)
        #expect(stats["execution_time_ms"]?.doubleValue != nil)
        // CouchDB's exact layout: rows on their own lines, trailing members after the array.
        let text = try fixture.server.request("POST", "/db/_find", body: #"{"selector": {"_id": "d001"}}"#).text
        #expect(text.hasPrefix("{\"docs\":[\r\n{\"_id\":\"d001\",\"_rev\":"))
        #expect(text.contains("\r\n],\r\n\"bookmark\": \""))
        #expect(text.hasSuffix("\"warning\": \"No matching index found, create an index to optimize query time.\"}\r\n"))
    }

    @Test func conflictsAreShownAndFound() throws {
        let fixture = try MangoFixture()
        defer { fixture.server.stop() }
        let (status, _) = try fixture.server.json("POST", "/db/_bulk_docs", body: #"""
            {"new_edits": false, "docs": [{"_id": "c1", "_rev": "1-aaa", "v": 1}, {"_id": "c1", "_rev": "1-bbb", "v": 2}]}
            """#)
        #expect(status == 201)
        let json = try fixture.find(#"{"selector": {"_conflicts": {"$exists": true}}, "conflicts": true}"#).json
        let docs = try #require(json["docs"]?.arrayValue)
        #expect(docs.map { $0["_id"] } == ["c1"])
        #expect(docs.first?["_conflicts"] == ["1-aaa"])
        #expect(try fixture.ids(#"{"selector": {"_conflicts": {"$exists": true}}}"#).isEmpty)
    }

    @Test func badRequestsGetCouchDBsErrors() throws {
        let fixture = try MangoFixture()
        defer { fixture.server.stop() }
        let cases: [(String, JSONValue)] = [
            (#"{}"#, ["error": "missing_required_key", "reason": "Missing required key: selector"]),
            (#"{"selector": {}, "colour": 1}"#, ["error": "invalid_key", "reason": "Invalid key colour for this request."]),
            (#"{"selector": {}, "limit": -1}"#, ["error": "invalid_non_neg_integer", "reason": "-1 is not an integer greater than or equal to zero"]),
            (#"{"selector": {}, "r": 0}"#, ["error": "invalid_pos_integer", "reason": "0 is not an integer greater than zero"]),
            (#"{"selector": {}, "conflicts": "yes"}"#, ["error": "invalid_boolean", "reason": "Invalid boolean value: \"yes\""]),
            (#"{"selector": {"n": {"$foo": 1}}}"#, ["error": "invalid_operator", "reason": "Invalid operator: $foo"]),
            (#"{"selector": {}, "sort": [{"n": "up"}]}"#, ["error": "invalid_sort_dir", "reason": "Invalid sort direction: \"up\""]),
            (#"{"selector": {}, "sort": ["a", {"b": "desc"}]}"#, ["error": "unsupported_mixed_sort", "reason": "Sorts currently only support a single direction for all fields."]),
            (#"{"selector": {}, "bookmark": "not-ours"}"#, ["error": "invalid_bookmark", "reason": "Invalid bookmark value: \"not-ours\""]),
            (#"{"selector": {}, "fields": "n"}"#, ["error": "invalid_fields", "reason": "Fields must be an array of strings, not: \"n\""]),
        ]
        for (body, expected) in cases {
            let (status, json) = try fixture.find(body)
            #expect(status == 400, "\(body)")
            #expect(json == expected, "\(body)")
        }
        #expect(try fixture.server.request("POST", "/db/_find", headers: [("Content-Type", "text/plain")],
                                           body: #"{"selector": {}}"#).status == 415)
        #expect(try fixture.server.request("GET", "/db/_find").status == 405)
        #expect(try fixture.find(#"{"selector": {}}"#, database: "nowhere").status == 404)
    }
}
