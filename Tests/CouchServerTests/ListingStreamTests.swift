import CouchCore
import CouchTestSupport
import Foundation
import Testing

/// A long listing (`_all_docs`, a view, a normal `_changes` feed) is sent a page of up to 500 rows at a time while the
/// pages after it are written on another thread: every row arrives once and in order across
/// the pages' bounds, large documents come in smaller pages, many long listings at once all
/// complete (more than the threads that write pages), and clients that hang up mid-listing
/// leave the server serving.
@Suite struct ListingStreamTests {
    static let documents = 1_700

    static func start() throws -> TestServer {
        let server = try TestServer()
        try server.createDatabase("db")
        for start in stride(from: 0, to: documents, by: 500) {
            let docs = (start..<min(start + 500, documents))
                .map { String(format: #"{"_id":"d%04d","n":%d,"text":"%@"}"#, $0, $0, String(repeating: "x", count: 200)) }
            #expect(try server.json("POST", "/db/_bulk_docs", body: #"{"docs":[\#(docs.joined(separator: ","))]}"#).status == 201)
        }
        _ = try server.put("db", "_design/v", #"{"views":{"by_n":{"map":"function (doc) { if (doc.n !== undefined) emit(doc.n, doc._id); }"}}}"#)
        return server
    }

    static func ids(_ json: JSONValue) -> [String] {
        (json["rows"]?.arrayValue ?? []).compactMap { $0["id"]?.stringValue }
    }

    @Test func everyRowArrivesOnceAndInOrderAcrossPages() throws {
        let server = try Self.start()
        defer { server.stop() }
        let expected = ["_design/v"] + (0..<Self.documents).map { String(format: "d%04d", $0) }

        let all = try server.json("GET", "/db/_all_docs?include_docs=true").json
        #expect(all["total_rows"] == JSONValue(expected.count))
        #expect(Self.ids(all) == expected)
        let rows = try #require(all["rows"]?.arrayValue)
        #expect(rows.dropFirst().enumerated().allSatisfy { $0.element["doc"]?["n"] == JSONValue($0.offset) })
        #expect(rows.allSatisfy { $0["value"]?["rev"] == $0["doc"]?["_rev"] && $0["doc"]?["_id"] == $0["id"] })

        let backwards = try server.json("GET", "/db/_all_docs?descending=true&skip=7&limit=1200").json
        #expect(Self.ids(backwards) == Array(expected.reversed().dropFirst(7).prefix(1200)))

        let view = try server.json("GET", "/db/_design/v/_view/by_n?skip=3&limit=1500").json
        let keys = (view["rows"]?.arrayValue ?? []).map { $0["key"]?.intValue ?? -1 }
        #expect(keys == Array(3..<1503))
        #expect(view["offset"] == 3)
    }

    /// A normal `_changes` feed is sent the same way, batch after batch: every change once and
    /// in order, its `last_seq` the last row's, with a limit and with a filter of IDs.
    @Test func aNormalChangesFeedArrivesWholeAcrossBatches() throws {
        let server = try Self.start()
        defer { server.stop() }
        let feed = try server.json("GET", "/db/_changes?include_docs=true").json
        let results = try #require(feed["results"]?.arrayValue)
        #expect(results.count == Self.documents + 1)
        let sequences = results.compactMap { sequenceNumber($0["seq"]) }
        #expect(sequences == Array(1...(Self.documents + 1)))
        #expect(feed["last_seq"] == results.last?["seq"])
        #expect(feed["pending"] == 0)
        #expect(results.dropLast().enumerated().allSatisfy { $0.element["doc"]?["n"] == JSONValue($0.offset) })

        let limited = try server.json("GET", "/db/_changes?since=10&limit=1200").json
        #expect(limited["results"]?.arrayValue?.compactMap { sequenceNumber($0["seq"]) } == Array(11...1210))
        #expect(limited["pending"] == JSONValue(Self.documents + 1 - 1210))

        let ids = ["d0001", "d0999", "d1500"]
        let filtered = try server.json("POST", "/db/_changes?filter=_doc_ids", body: #"{"doc_ids":["d0001","d0999","d1500"]}"#).json
        #expect(filtered["results"]?.arrayValue?.compactMap { $0["id"]?.stringValue } == ids)
    }

    /// Pages of large documents hold fewer rows (about a megabyte a page), in `_all_docs` and in
    /// a view with its documents: still every row, in order.
    @Test func largeDocumentsComeInSmallerPagesAndAllArrive() throws {
        let server = try TestServer()
        defer { server.stop() }
        try server.createDatabase("big")
        let text = String(repeating: "y", count: 150_000)
        for index in 0..<40 {
            #expect(try server.json("PUT", String(format: "/big/b%02d", index), body: #"{"n":\#(index),"text":"\#(text)"}"#).status == 201)
        }
        _ = try server.put("big", "_design/v", #"{"views":{"by_n":{"map":"function (doc) { if (doc.n !== undefined) emit(doc.n); }"}}}"#)
        // (`_design/v` is the first row of `_all_docs`.)
        for path in ["/big/_all_docs?include_docs=true&skip=2&limit=38", "/big/_design/v/_view/by_n?include_docs=true&skip=1&limit=38"] {
            let rows = try #require(try server.json("GET", path).json["rows"]?.arrayValue)
            #expect(rows.map { $0["doc"]?["n"]?.intValue ?? -1 } == Array(1...38), "\(path)")
            #expect(rows.allSatisfy { $0["doc"]?["text"]?.stringValue?.count == 150_000 }, "\(path)")
        }
    }

    @Test func manyLongListingsAtOnceEachComplete() throws {
        let server = try Self.start()
        defer { server.stop() }
        // Each listing stays open until read: more of them than the threads that write pages.
        let connections = try (0..<24).map { _ in try HTTPTestConnection(port: server.port) }
        defer { connections.forEach { $0.close() } }
        for (index, connection) in connections.enumerated() {
            let path = index % 2 == 0 ? "/db/_all_docs?include_docs=true" : "/db/_design/v/_view/by_n?include_docs=true"
            #expect(try connection.startStreaming("GET", path).status == 200)
        }
        for (index, connection) in connections.enumerated() {
            let body = try connection.readToEnd(timeout: 30)
            let json = try JSONValue.parse(body)
            #expect(json["rows"]?.arrayValue?.count == Self.documents + (index % 2 == 0 ? 1 : 0))
            #expect(json["rows"]?.arrayValue?.last?["doc"]?["n"] == JSONValue(Self.documents - 1))
        }
    }

    @Test func clientsHangingUpMidListingLeaveTheServerServing() throws {
        let server = try Self.start()
        defer { server.stop() }
        for _ in 0..<20 {
            let connection = try HTTPTestConnection(port: server.port)
            #expect(try connection.startStreaming("GET", "/db/_all_docs?include_docs=true").status == 200)
            #expect(try connection.readLine(timeout: 10)?.hasPrefix(#"{"total_rows":1701"#) == true)
            connection.close()
        }
        let all = try server.json("GET", "/db/_all_docs").json
        #expect(all["rows"]?.arrayValue?.count == Self.documents + 1)
        #expect(try server.json("GET", "/").status == 200)
    }
}
