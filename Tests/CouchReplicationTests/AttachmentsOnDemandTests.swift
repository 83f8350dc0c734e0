import CouchCore
import CouchServer
import CouchTestSupport
import Foundation
import Testing

/// Couchette's `"attachments": "on_demand"` pulls: stubs stored, bodies fetched from the
/// job's source when first read, and local for good afterwards.
@Suite(.serialized) struct AttachmentsOnDemandTests {
    @Test func aPullLeavesBodiesBehindAndAReadFetchesThemOnce() async throws {
        let (a, b) = (try TestServer(), try TestServer())
        defer { a.stop(); b.stop() }
        try await b.call("PUT", "/photos")
        let first = AttachmentReplicationTests.bytes(count: 20_000, seed: 5)
        let second = AttachmentReplicationTests.bytes(count: 3_000, seed: 6)
        _ = try await b.putAttachment("photos", "pic", "image.bin", rev: nil, first)
        _ = try await b.putAttachment("photos", "other", "more.bin", rev: nil, second)
        try await b.call("PUT", "/photos/plain", body: ["n": 1])
        let remoteStub = try #require(try await b.call("GET", "/photos/pic").json["_attachments"]?["image.bin"])

        try await a.call("PUT", "/_replicator/pull", body: [
            "source": JSONValue(b.url + "/photos"), "target": "photos", "create_target": true, "attachments": "on_demand",
        ])
        #expect(try await eventually { try await a.call("GET", "/_replicator/pull").json["_replication_state"] == "completed" })
        #expect(try await a.documentCount("photos") == 3)
        #expect(try a.blobFiles("photos").isEmpty, "no body was downloaded")
        let stub = try #require(try await a.call("GET", "/photos/pic").json["_attachments"]?["image.bin"])
        #expect(stub["stub"] == true && stub["length"] == 20_000 && stub["digest"] == remoteStub["digest"]
                && stub["revpos"] == remoteStub["revpos"] && stub["content_type"] == "application/octet-stream")

        let fetched = try await a.attachment("photos", "pic", "image.bin")
        #expect(fetched.status == 200 && fetched.body == first, "fetched from the source and served")
        #expect(try a.blobFiles("photos").count == 1, "and stored")

        b.stop()
        let again = try await a.attachment("photos", "pic", "image.bin")
        #expect(again.status == 200 && again.body == first, "served locally with the source gone")
        let inline = try await a.call("GET", "/photos/pic?attachments=true").json
        #expect(inline["_attachments"]?["image.bin"]?["data"]?.stringValue == Base64.encode(first))

        let unreachable = try await a.attachment("photos", "other", "more.bin")
        #expect(unreachable.status == 502)
        #expect(try JSONValue.parse(unreachable.body)["error"] == "attachment_not_downloaded")
        #expect(try await a.call("GET", "/photos/other?attachments=true").status == 502)
        #expect(try await a.call("GET", "/photos/other").json["_attachments"]?["more.bin"]?["stub"] == true,
                "the stub is still listed")

        // Onward: what has its body goes; what has not is a counted failure, never a stub the target cannot back.
        let onward = try await a.replicate(["source": "photos", "target": "onward", "create_target": true])
        #expect(onward.status == 200)
        #expect(onward.json["history"]?[0]?["doc_write_failures"] == 1)
        #expect(try await a.attachment("onward", "pic", "image.bin").body == first)
        #expect(try await a.call("GET", "/onward/other").status == 404)
        #expect(try await a.call("GET", "/onward/plain").status == 200)
    }

    /// A body stored gzip-encoded arrives as stored (same digest); a revision edited here
    /// since, unknown to the source, still gets the body its stub names.
    @Test func aCompressedBodyOfALocallyEditedRevisionIsFetched() async throws {
        let (a, b) = (try TestServer(), try TestServer())
        defer { a.stop(); b.stop() }
        try await b.call("PUT", "/notes")
        let text = Array(String(repeating: "compressible text ", count: 5_000).utf8)
        let encoded = Gzip.compress(text)
        try await b.putDocuments("notes", [[
            "_id": "z", "_rev": "1-a",
            "_attachments": ["t.txt": ["content_type": "text/plain", "revpos": 1,
                                       "digest": JSONValue("md5-" + Base64.encode(Digest.md5(encoded))),
                                       "length": JSONValue(text.count), "encoding": "gzip",
                                       "data": JSONValue(Base64.encode(encoded))]],
        ]], newEdits: false)
        try await a.call("PUT", "/_replicator/pull", body: [
            "source": JSONValue(b.url + "/notes"), "target": "notes", "create_target": true, "attachments": "on_demand",
        ])
        #expect(try await eventually { try await a.call("GET", "/_replicator/pull").json["_replication_state"] == "completed" })
        var local = try await a.call("GET", "/notes/z").json.objectValue ?? [:]
        local["edited"] = true
        #expect(try await a.call("PUT", "/notes/z", body: .object(local)).status == 201)
        #expect(try a.blobFiles("notes").isEmpty)

        let plain = try await a.attachment("notes", "z", "t.txt")
        #expect(plain.status == 200 && plain.body == text)
        let compressed = try await a.attachment("notes", "z", "t.txt", headers: [("Accept-Encoding", "gzip")])
        #expect(compressed.body == encoded, "stored as the source stored it")
        #expect(try await a.call("GET", "/notes/z?rev=1-a").json["_attachments"]?["t.txt"]?["digest"]
                == JSONValue("md5-" + Base64.encode(Digest.md5(encoded))))
        #expect(try a.blobFiles("notes").count == 1)
    }

    /// A peer pulling from the on-demand copy gets the bodies: the copy fetches them as the
    /// peer's replicator reads them (`open_revs` with attachments).
    @Test func aPeerPullingFromTheCopyGetsTheBodies() async throws {
        let (a, b, c) = (try TestServer(), try TestServer(), try TestServer())
        defer { a.stop(); b.stop(); c.stop() }
        try await b.call("PUT", "/photos")
        let bytes = AttachmentReplicationTests.bytes(count: 10_000, seed: 7)
        _ = try await b.putAttachment("photos", "pic", "image.bin", rev: nil, bytes)
        try await a.call("PUT", "/_replicator/pull", body: [
            "source": JSONValue(b.url + "/photos"), "target": "photos", "create_target": true, "attachments": "on_demand",
        ])
        #expect(try await eventually { try await a.call("GET", "/_replicator/pull").json["_replication_state"] == "completed" })
        #expect(try a.blobFiles("photos").isEmpty)
        let pulled = try await c.replicate(["source": JSONValue(a.url + "/photos"), "target": "photos", "create_target": true])
        #expect(pulled.json["history"]?[0]?["docs_written"] == 1 && pulled.json["history"]?[0]?["doc_write_failures"] == 0)
        #expect(try await c.attachment("photos", "pic", "image.bin").body == bytes)
        #expect(try a.blobFiles("photos").count == 1)
    }

    /// Listings with `attachments=true` fetch the bodies they send, as a document's `GET`
    /// does (they used to end mid-answer at the first body left on the source).
    @Test func listingsWithAttachmentsFetchTheBodiesTheySend() async throws {
        let (a, b) = (try TestServer(), try TestServer())
        defer { a.stop(); b.stop() }
        try await b.call("PUT", "/photos")
        var bodies: [String: [UInt8]] = [:]
        for index in 0..<3 {
            let bytes = AttachmentReplicationTests.bytes(count: 5_000 + index, seed: UInt64(20 + index))
            bodies["pic\(index)"] = bytes
            _ = try await b.putAttachment("photos", "pic\(index)", "image.bin", rev: nil, bytes)
        }
        for (job, target) in [("first", "listed"), ("second", "changed"), ("third", "unreached")] {
            try await a.call("PUT", "/_replicator/\(job)", body: [
                "source": JSONValue(b.url + "/photos"), "target": JSONValue(target), "create_target": true,
                "attachments": "on_demand",
            ])
            #expect(try await eventually { try await a.call("GET", "/_replicator/\(job)").json["_replication_state"] == "completed" })
            #expect(try a.blobFiles(target).isEmpty)
        }
        func inlineBodies(_ documents: [JSONValue]) -> [String: String] {
            var found: [String: String] = [:]
            for document in documents {
                if let id = document["_id"]?.stringValue, let data = document["_attachments"]?["image.bin"]?["data"]?.stringValue {
                    found[id] = data
                }
            }
            return found
        }
        let expected = bodies.mapValues { Base64.encode($0) }

        let listing = try await a.call("GET", "/listed/_all_docs?include_docs=true&attachments=true")
        #expect(listing.status == 200)
        #expect(inlineBodies((listing.json["rows"]?.arrayValue ?? []).compactMap { $0["doc"] }) == expected)
        #expect(try a.blobFiles("listed").count == 3, "fetched and stored")

        let changes = try await a.call("GET", "/changed/_changes?include_docs=true&attachments=true")
        #expect(changes.status == 200)
        #expect(inlineBodies((changes.json["results"]?.arrayValue ?? []).compactMap { $0["doc"] }) == expected)
        #expect(try a.blobFiles("changed").count == 3)

        // With the source gone, each row still goes out whole, its attachment a stub.
        b.stop()
        let unreached = try await a.call("GET", "/unreached/_all_docs?include_docs=true&attachments=true")
        let rows = unreached.json["rows"]?.arrayValue ?? []
        #expect(unreached.status == 200 && rows.count == 3)
        #expect(rows.allSatisfy { $0["doc"]?["_attachments"]?["image.bin"]?["stub"] == true })
        try await a.call("PUT", "/unreached/_design/d", body: ["views": ["all": ["map": "function (doc) { emit(doc._id, null); }"]]])
        let view = try await a.call("GET", "/unreached/_design/d/_view/all?include_docs=true&attachments=true")
        let viewRows = view.json["rows"]?.arrayValue ?? []
        #expect(view.status == 200 && viewRows.count == 3)
        #expect(viewRows.allSatisfy { $0["doc"]?["_attachments"]?["image.bin"]?["stub"] == true })
    }

    /// After a fetch fails, the rest of the answer asks the source nothing: a listing must not
    /// wait for an unreachable source once per document.
    @Test func aListingAsksTheSourceNoMoreAfterAFetchFails() async throws {
        let (a, b) = (try TestServer(), try TestServer())
        defer { a.stop(); b.stop() }
        try await b.call("PUT", "/photos")
        for index in 0..<4 {
            _ = try await b.putAttachment("photos", "pic\(index)", "image.bin", rev: nil,
                                          AttachmentReplicationTests.bytes(count: 2_000, seed: UInt64(40 + index)))
        }
        try await a.call("PUT", "/_replicator/pull", body: [
            "source": JSONValue(b.url + "/photos"), "target": "photos", "create_target": true, "attachments": "on_demand",
        ])
        #expect(try await eventually { try await a.call("GET", "/_replicator/pull").json["_replication_state"] == "completed" })
        try await b.call("DELETE", "/photos")
        func sourceGETs() async throws -> Int {
            try await b.call("GET", "/_node/_local/_stats/couchdb/httpd_request_methods").json["GET"]?["value"]?.intValue ?? -1
        }
        let before = try await sourceGETs()
        let listing = try await a.call("GET", "/photos/_all_docs?include_docs=true&attachments=true")
        let asked = try await sourceGETs() - before - 1
        let rows = listing.json["rows"]?.arrayValue ?? []
        #expect(listing.status == 200 && rows.count == 4)
        #expect(rows.allSatisfy { $0["doc"]?["_attachments"]?["image.bin"]?["stub"] == true })
        #expect(asked <= 2, "\(asked) requests to the source: one document's attempts, not every document's")
    }

    @Test func anAttachmentsFieldOtherThanAllOrOnDemandIsRefused() async throws {
        let a = try TestServer()
        defer { a.stop() }
        try await a.call("PUT", "/source")
        let answer = try await a.replicate(["source": "source", "target": "copy", "create_target": true, "attachments": "some"])
        #expect(answer.status == 400)
    }
}
