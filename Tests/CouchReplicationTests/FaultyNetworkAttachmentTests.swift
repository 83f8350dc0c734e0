import CouchCore
import CouchReplication
import CouchTestSupport
import Foundation
import Testing

/// Pushes and pulls of documents with attachments, conflicts and deletions through a network
/// that drops, resets, fails (500, 502, 503, 429), truncates answers and reorders requests at
/// random: each ends with identical revision trees and attachment digests, and
/// `doc_write_failures` at zero (no document was refused; failed requests are not failures of
/// documents).
@Suite(.serialized) struct FaultyNetworkAttachmentTests {
    static let faults = FaultyProxy.Faults(dropBefore: 0.04, dropAfter: 0.04, serverError: 0.03, busy: 0.06, reset: 0.04,
                                           truncate: 0.05, reorder: 0.08)

    private func prepareSource(_ server: TestServer) async throws {
        try await server.call("PUT", "/source")
        try await server.fill("source", count: 120)
        var generator = SystemRandomNumberGenerator()
        for index in stride(from: 0, to: 120, by: 4) {
            let id = String(format: "doc%05d", index)
            let rev = try await server.call("GET", "/source/\(id)").json["_rev"]!.stringValue!
            let size = Int.random(in: 1...90_000, using: &generator)
            let bytes = (0..<size).map { _ in UInt8.random(in: 0...255, using: &generator) }
            let response = try await offPool {
                try httpRequest(port: server.port, "PUT", "/source/\(id)/file.bin?rev=\(rev)",
                                headers: [("Content-Type", "application/octet-stream")], body: bytes)
            }
            #expect(response.status == 201)
        }
        // Conflicting branches (one with an inline attachment) and deletions.
        for index in stride(from: 1, to: 120, by: 10) {
            let id = String(format: "doc%05d", index)
            try await server.putDocuments("source", [
                ["_id": JSONValue(id), "_rev": "2-c0ffee", "_revisions": ["start": 2, "ids": ["c0ffee", "b0b"]], "branch": true,
                 "_attachments": ["conflict.txt": ["content_type": "text/plain", "data": "Y29uZmxpY3Q="]]],
            ], newEdits: false)
        }
        for index in stride(from: 2, to: 120, by: 15) {
            let id = String(format: "doc%05d", index)
            let rev = try await server.call("GET", "/source/\(id)").json["_rev"]!.stringValue!
            try await server.call("DELETE", "/source/\(id)?rev=\(rev)")
        }
    }

    private func check(_ result: JSONValue, _ source: TestServer, _ target: TestServer, _ database: String,
                       proxy: FaultyProxy) async throws {
        #expect(result["ok"] == true, "\(result.serializedString())")
        let failures = result["history"]?[0]?["doc_write_failures"]?.intValue
        #expect(failures == 0, "\(result.serializedString())")
        #expect(proxy.faultsInjected > 10, "the network really was faulty")
        #expect(proxy.faultsByKind["overtaken", default: 0] > 0, "requests really were reordered: \(proxy.faultsByKind)")
        #expect(try await source.revisionTrees("source") == target.revisionTrees(database))
    }

    @Test func aPushThroughAFaultyNetworkEndsIdentical() async throws {
        let (a, b) = (try TestServer(), try TestServer())
        let proxy = try FaultyProxy(upstreamPort: b.port, faults: Self.faults, seed: 11)
        defer { a.replications.stopAll(); proxy.stop(); a.stop(); b.stop() }
        a.replications.jobBackoff = Backoff(initialMilliseconds: 50, maximumMilliseconds: 200)
        try await prepareSource(a)
        try await b.call("PUT", "/target")
        let (status, result) = try await a.replicate([
            "source": "source", "target": JSONValue(proxy.url + "/target"), "worker_batch_size": 20, "retries_per_request": 10,
        ])
        #expect(status == 200)
        try await check(result, a, b, "target", proxy: proxy)
    }

    @Test func aPullThroughAFaultyNetworkEndsIdentical() async throws {
        let (a, b) = (try TestServer(), try TestServer())
        let proxy = try FaultyProxy(upstreamPort: a.port, faults: Self.faults, seed: 12)
        defer { b.replications.stopAll(); proxy.stop(); a.stop(); b.stop() }
        b.replications.jobBackoff = Backoff(initialMilliseconds: 50, maximumMilliseconds: 200)
        try await prepareSource(a)
        try await b.call("PUT", "/pulled")
        let (status, result) = try await b.replicate([
            "source": JSONValue(proxy.url + "/source"), "target": "pulled", "worker_batch_size": 20, "retries_per_request": 10,
        ])
        #expect(status == 200)
        try await check(result, a, b, "pulled", proxy: proxy)
    }
}
