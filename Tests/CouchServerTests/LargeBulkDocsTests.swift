import CouchCore
import CouchTestSupport
import Foundation
import Testing

/// A `_bulk_docs` request of more than one preparation chunk (128 documents) is prepared a chunk
/// at a time, on the cores and by the writer itself, while the writer writes the chunks before:
/// each document gets the answer it would get alone, and whatever refuses the whole request
/// leaves nothing written.
@Suite struct LargeBulkDocsTests {
    static let count = 300

    /// `count` documents, `replacing` some of them by the given JSON texts.
    static func body(_ replacing: [Int: String] = [:], newEdits: Bool = true) -> String {
        let documents = (0..<count).map { replacing[$0] ?? #"{"_id":"doc-\#($0)","n":\#($0)}"# }
        return #"{"docs":[\#(documents.joined(separator: ","))]"# + (newEdits ? "}" : #","new_edits":false}"#)
    }

    @Test func eachDocumentGetsTheResultItWouldAlone() throws {
        let server = try TestServer()
        defer { server.stop() }
        try server.createDatabase("db")
        _ = try server.put("db", "taken", "{}")
        var replacing: [Int: String] = [7: #"{"_id":"taken"}"#, 150: #"{"_id":"_local/l","x":1}"#,
                                        299: #"{"_id":"_design/d","views":{}}"#]
        let unnamed = [3, 140, 141, 260]
        for index in unnamed { replacing[index] = #"{"n":\#(index)}"# }
        let (status, results) = try server.json("POST", "/db/_bulk_docs", body: Self.body(replacing))
        #expect(status == 201)
        let rows = try #require(results.arrayValue)
        #expect(rows.count == Self.count)
        #expect(rows[7] == ["id": "taken", "error": "conflict", "reason": "Document update conflict."])
        #expect(rows[150]["id"] == "_local/l" && rows[150]["rev"] == "0-1")
        #expect(rows[299]["id"] == "_design/d" && rows[299]["ok"] == true)
        #expect(rows[0]["ok"] == true && rows[0]["id"] == "doc-0" && rows[0]["rev"]?.stringValue?.hasPrefix("1-") == true)
        // New IDs in the documents' order, as the sequential algorithm gives them to a body read whole.
        let ids = unnamed.compactMap { rows[$0]["id"]?.stringValue }
        #expect(ids.count == unnamed.count && ids.allSatisfy { $0.count == 32 })
        #expect(ids == ids.sorted() && Set(ids).count == ids.count)
        for index in unnamed {
            #expect(try server.json("GET", "/db/\(ids[unnamed.firstIndex(of: index)!])").json["n"] == JSONValue(index))
        }
        // Every document but the conflict and the local one, and the one there before.
        #expect(try server.json("GET", "/db").json["doc_count"] == JSONValue(Self.count - 2 + 1))
        #expect(sequenceNumber(try server.json("GET", "/db").json["update_seq"]) == Self.count - 2 + 1)
    }

    @Test func whatRefusesTheWholeRequestWritesNothing() throws {
        let server = try TestServer()
        defer { server.stop() }
        try server.createDatabase("db")
        try server.createDatabase("parts?partitioned=true")
        // Late in the body, after the writer has written earlier chunks: refused all the same,
        // with the answer a body of that document alone gets.
        let refused: [(database: String, document: String, newEdits: Bool)] = [
            ("db", #"{"_id":"doc-250","n":1}"#, false),
            ("db", #"{"_id":"_bad"}"#, true),
            ("db", #"{"_id":5}"#, true),
            ("db", #"{"_id":"doc-260","_attachments":5}"#, true),
            ("parts", #"{"_id":"nopartition"}"#, true),
        ]
        for (database, document, newEdits) in refused {
            let alone = try server.json("POST", "/\(database)/_bulk_docs", body: #"{"docs":[\#(document)]"#
                                            + (newEdits ? "}" : #","new_edits":false}"#))
            var replacing = [250: document]
            if database == "parts" {
                for index in 0..<Self.count where index != 250 { replacing[index] = #"{"_id":"p:doc-\#(index)"}"# }
            }
            if !newEdits {
                for index in 0..<Self.count where index != 250 {
                    replacing[index] = #"{"_id":"doc-\#(index)","_rev":"1-\#(String(repeating: "a", count: 32))"}"#
                }
            }
            let large = try server.json("POST", "/\(database)/_bulk_docs", body: Self.body(replacing, newEdits: newEdits))
            #expect(alone.status == 400 || alone.status == 201)
            if alone.status == 201 {
                // Refused as that document's own result, the others written.
                #expect(large.status == 201 && large.json[250] == alone.json[0])
                continue
            }
            #expect(large.status == alone.status && large.json == alone.json, "\(document)")
            #expect(sequenceNumber(try server.json("GET", "/\(database)").json["update_seq"]) == 0, "\(document)")
        }
    }

    @Test func aMemberCannotSlipADesignDocumentIntoALargeRequest() throws {
        let fixture = try SecuredServer()
        var replacing = [200: #"{"_id":"_design/sneaky","views":{}}"#]
        replacing[201] = #"{"_id":"_local/mine"}"#
        let (status, results) = try fixture.server.json("POST", "/secured/_bulk_docs", headers: fixture.credentials("member"),
                                                        body: Self.body(replacing))
        #expect(status == 201)
        #expect(results[200] == ["id": "_design/sneaky", "error": "forbidden", "reason": "You are not a db or server admin."])
        #expect(results[201]?["ok"] == true && results[0]?["ok"] == true && results[299]?["ok"] == true)
        #expect(try fixture.server.json("GET", "/secured/_design/sneaky", headers: [fixture.admin]).status == 404)
        // Someone who may not write at all is refused the whole request, as with a small one.
        let before = try fixture.server.json("GET", "/secured", headers: [fixture.admin]).json["update_seq"]
        let outsider = try fixture.server.json("POST", "/secured/_bulk_docs", headers: fixture.credentials("outsider"),
                                               body: Self.body([0: #"{"_id":"outsiders"}"#]))
        #expect(outsider.status == 403)
        #expect(try fixture.server.json("GET", "/secured", headers: [fixture.admin]).json["update_seq"] == before)
        #expect(try fixture.server.json("GET", "/secured/outsiders", headers: [fixture.admin]).status == 404)
    }
}
