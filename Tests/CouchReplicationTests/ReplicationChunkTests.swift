import CouchCore
import CouchTestSupport
import Foundation
import Testing

/// A worker fetches and writes its changes in chunks sized from the documents it has seen:
/// hundreds of small documents at once, large ones a few at a time.
@Suite(.serialized) struct ReplicationChunkTests {
    /// `_bulk_get` requests the source has answered (a pull's only POSTs to its source).
    func bulkGets(_ source: TestServer) async throws -> Int {
        try await source.call("GET", "/_node/_local/_stats/couchdb/httpd_request_methods").json["POST"]?["value"]?.intValue ?? -1
    }

    func pull(_ database: String, from source: TestServer, into target: TestServer) async throws -> Int {
        let before = try await bulkGets(source)
        let answer = try await target.replicate([
            "source": JSONValue(source.url + "/" + database), "target": JSONValue(database), "create_target": true,
            "worker_processes": 1,
        ])
        #expect(answer.status == 200, "\(answer.json.serializedString())")
        return try await bulkGets(source) - before
    }

    @Test func smallDocumentsTravelHundredsAtATime() async throws {
        let (source, target) = (try TestServer(), try TestServer())
        defer { source.stop(); target.stop() }
        try await source.call("PUT", "/small")
        try await source.fill("small", count: 1000)
        let requests = try await pull("small", from: source, into: target)
        #expect(try await target.documentCount("small") == 1000)
        // Batches of up to 500 changes as the feed delivers them, each fetched in one or two
        // chunks (100 documents before their size is known): 3 to 5 requests, a few more when a
        // slow machine's feed cuts a batch short (6 under ThreadSanitizer); chunks of 100 made ten.
        #expect(requests <= 7, "\(requests) _bulk_get requests for 1,000 small documents")
    }

    @Test func largeDocumentsTravelAFewAtATime() async throws {
        let (source, target) = (try TestServer(), try TestServer())
        defer { source.stop(); target.stop() }
        try await source.call("PUT", "/large")
        let filler = JSONValue(String(repeating: "x", count: 64 * 1024))
        for start in stride(from: 0, to: 300, by: 25) {
            try await source.putDocuments("large", (start..<start + 25).map {
                ["_id": JSONValue(String(format: "big%03d", $0)), "text": filler]
            })
        }
        let requests = try await pull("large", from: source, into: target)
        #expect(try await target.documentCount("large") == 300)
        // 100 documents before their size is known, then 1 MiB (16 of 64 KB) per chunk: at
        // least 13 (chunks of 100 made 3 to 6, as the feed delivered the changes).
        #expect(requests >= 10, "\(requests) _bulk_get requests for 300 documents of 64 KB")
    }
}
