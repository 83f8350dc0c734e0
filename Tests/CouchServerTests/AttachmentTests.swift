import CouchCore
import CouchTestSupport
import Foundation
import Testing

@Suite struct AttachmentTests {
    let server: TestServer

    init() throws {
        server = try TestServer()
        try server.createDatabase("db")
    }

    static func bytes(_ count: Int, seed: UInt64 = 1) -> [UInt8] {
        var state = seed
        return (0..<count).map { _ in
            state = state &* 6364136223846793005 &+ 1442695040888963407
            return UInt8(truncatingIfNeeded: state >> 33)
        }
    }

    func attachmentFiles() throws -> [String] {
        let directory = server.directory + "/db.attachments"
        return try FileManager.default.contentsOfDirectory(atPath: directory).filter { $0 != "staging" && $0 != "pending" }
    }

    @Test func standaloneUploadReadsBackByteIdenticalWithRangesAndETag() throws {
        defer { server.stop() }
        let payload = Self.bytes(3 * 1024 * 1024 + 17)
        let put = try httpRequest(port: server.port, "PUT", "/db/doc/data%2Fblob%20%C3%A9.bin",
                                  headers: [("Content-Type", "application/x-test")], body: payload)
        #expect(put.status == 201)
        let created = try JSONValue.parse(put.body)
        let rev = try #require(created["rev"]?.stringValue)
        #expect(rev.hasPrefix("1-"))

        let get = try server.request("GET", "/db/doc/data%2Fblob%20%C3%A9.bin")
        #expect(get.status == 200)
        #expect(get.body == payload)
        #expect(get.header("Content-Type") == "application/x-test")
        #expect(get.header("Content-Length") == String(payload.count))
        let md5 = "md5-" + Base64.encode(Digest.md5(payload))
        #expect(get.header("ETag") == "\"\(md5.dropFirst(4))\"")
        #expect(try server.request("GET", "/db/doc/data%2Fblob%20%C3%A9.bin", headers: [("If-None-Match", get.header("ETag")!)]).status == 304)
        #expect(try server.request("HEAD", "/db/doc/data%2Fblob%20%C3%A9.bin").header("Content-Length") == String(payload.count))

        let range = try server.request("GET", "/db/doc/data%2Fblob%20%C3%A9.bin", headers: [("Range", "bytes=100-199")])
        #expect(range.status == 206)
        #expect(range.body == Array(payload[100...199]))
        #expect(range.header("Content-Range") == "bytes 100-199/\(payload.count)")
        let suffix = try server.request("GET", "/db/doc/data%2Fblob%20%C3%A9.bin", headers: [("Range", "bytes=-10")])
        #expect(suffix.body == Array(payload.suffix(10)))
        #expect(try server.request("GET", "/db/doc/data%2Fblob%20%C3%A9.bin", headers: [("Range", "bytes=\(payload.count)-")]).status == 416)
        // A backward range is not satisfiable either, as in CouchDB; a malformed end is ignored.
        #expect(try server.request("GET", "/db/doc/data%2Fblob%20%C3%A9.bin", headers: [("Range", "bytes=5-3")]).status == 416)
        #expect(try server.request("GET", "/db/doc/data%2Fblob%20%C3%A9.bin", headers: [("Range", "bytes=5-x")]).status == 200)

        let doc = try server.json("GET", "/db/doc").json
        let stub = doc["_attachments"]?["data/blob é.bin"]
        #expect(stub == ["content_type": "application/x-test", "revpos": 1, "digest": JSONValue(md5),
                         "length": JSONValue(payload.count), "stub": true])
        #expect(try server.json("GET", "/db/doc/missing.bin").json == ["error": "not_found", "reason": "Document is missing attachment"])
    }

    @Test func inlineDataStubsRevposAndAttsSince() throws {
        defer { server.stop() }
        let rev1 = try server.put("db", "doc", #"{"a":1,"_attachments":{"one.txt":{"content_type":"text/plain","data":"aGVsbG8="}}}"#)
        // Keeping an attachment takes a stub naming its revpos; adding another gives it the new revpos.
        let rev2 = try server.put("db", "doc", #"""
            {"_rev":"\#(rev1)","a":2,"_attachments":{"one.txt":{"stub":true,"revpos":1},"two.txt":{"content_type":"text/plain","data":"d29ybGQ="}}}
            """#)
        let withData = try server.json("GET", "/db/doc?attachments=true").json
        #expect(withData["_attachments"]?["one.txt"]?["data"] == "aGVsbG8=")
        #expect(withData["_attachments"]?["two.txt"]?["revpos"] == 2)
        let since = try server.json("GET", "/db/doc?atts_since=%5B%22\(rev1)%22%5D").json
        #expect(since["_attachments"]?["one.txt"]?["stub"] == true)
        #expect(since["_attachments"]?["two.txt"]?["data"] == "d29ybGQ=")
        #expect(try server.request("GET", "/db/doc/two.txt").text == "world")

        let badStub = try server.json("PUT", "/db/doc", body: #"{"_rev":"\#(rev2)","_attachments":{"one.txt":{"stub":true,"revpos":7}}}"#)
        #expect(badStub.status == 412)
        #expect(badStub.json["error"] == "missing_stub")
        let unknownStub = try server.json("PUT", "/db/doc", body: #"{"_rev":"\#(rev2)","_attachments":{"nope":{"stub":true}}}"#)
        #expect(unknownStub.status == 412)

        // Leaving _attachments out drops them, as in CouchDB.
        let rev3 = try server.put("db", "doc", #"{"_rev":"\#(rev2)","a":3}"#)
        #expect(try server.json("GET", "/db/doc").json["_attachments"] == nil)
        #expect(try server.request("GET", "/db/doc/one.txt?rev=\(rev2)").text == "hello")
        _ = rev3
    }

    @Test func badInputIsRefusedAndLeavesNothingBehind() throws {
        defer { server.stop() }
        let cases = [
            #"{"_attachments":{"a":{"data":"not base64!"}}}"#,
            #"{"_attachments":{"_a":{"data":"aGVsbG8="}}}"#,
            #"{"_attachments":{"a":{"content_type":"text/plain"}}}"#,
            #"{"_attachments":{"a":"text"}}"#,
        ]
        for body in cases {
            let response = try server.json("PUT", "/db/doc", body: body)
            #expect(response.status == 400, "\(body)")
            #expect(response.json["error"] == "bad_request", "\(body)")
        }
        #expect(sequenceNumber(try server.json("GET", "/db").json["update_seq"]) == 0)
        #expect(try attachmentFiles().isEmpty)
        #expect(try server.request("PUT", "/db/doc/_bad", body: "x").status == 400)
        #expect(try server.request("PUT", "/db/doc/file?rev=1-nope", body: "x").status == 409)
    }

    @Test func multipartUploadAndMultipartRead() throws {
        defer { server.stop() }
        let big = Self.bytes(2 * 1024 * 1024, seed: 7)
        let boundary = "abc123boundary"
        var body = Array("--\(boundary)\r\nContent-Type: application/json\r\n\r\n".utf8)
        body += Array(#"{"title":"multi","_attachments":{"big.bin":{"follows":true,"content_type":"application/octet-stream","length":\#(big.count)},"small.txt":{"follows":true,"content_type":"text/plain","length":5}}}"#.utf8)
        body += Array("\r\n--\(boundary)\r\nContent-Disposition: attachment; filename=\"big.bin\"\r\n\r\n".utf8) + big
        body += Array("\r\n--\(boundary)\r\n\r\nhello\r\n--\(boundary)--".utf8)
        let put = try httpRequest(port: server.port, "PUT", "/db/multi",
                                  headers: [("Content-Type", "multipart/related; boundary=\"\(boundary)\"")], body: body)
        #expect(put.status == 201, "\(put.text)")
        #expect(try server.request("GET", "/db/multi/big.bin").body == big)
        #expect(try server.request("GET", "/db/multi/small.txt").text == "hello")

        let related = try server.request("GET", "/db/multi?attachments=true", headers: [("Accept", "multipart/related")])
        #expect(related.header("Content-Type")?.hasPrefix("multipart/related") == true)
        // Its length is known before it is sent, as CouchDB sends it: no chunks.
        #expect(related.header("Content-Length") == String(related.body.count))
        let parts = try MultipartParts(related)
        #expect(parts.bodies.count == 3)
        let json = try JSONValue.parse(parts.bodies[0])
        #expect(json["_attachments"]?["big.bin"]?["follows"] == true)
        #expect(Array(parts.bodies[1].utf8).count == big.count || parts.headers[1].contains("big.bin"))

        let broken = try httpRequest(port: server.port, "PUT", "/db/broken",
                                     headers: [("Content-Type", "multipart/related; boundary=\"\(boundary)\"")],
                                     body: Array("--\(boundary)\r\nContent-Type: application/json\r\n\r\n{}".utf8))
        #expect(broken.status == 400)
        #expect(try server.json("GET", "/db/broken").status == 404)
    }

    @Test func openRevsMultipartNestsDocumentsWithAttachments() throws {
        defer { server.stop() }
        // Not a compressible type: the part carries the bytes as sent.
        _ = try server.put("db", "doc", #"{"_attachments":{"a.txt":{"content_type":"application/octet-stream","data":"aGVsbG8="}}}"#)
        let response = try server.request("GET", "/db/doc?open_revs=all&revs=true&attachments=true",
                                          headers: [("Accept", "multipart/mixed")])
        #expect(response.status == 200)
        #expect(response.text.contains("Content-Type: multipart/related; boundary="))
        #expect(response.text.contains("\"follows\":true"))
        #expect(response.text.contains("filename=\"a.txt\""))
        #expect(response.text.contains("hello"))
        let json = try #require(try server.json("GET", "/db/doc?open_revs=all&attachments=true").json.arrayValue)
        #expect(json[0]["ok"]?["_attachments"]?["a.txt"]?["data"] == "aGVsbG8=")
    }

    @Test func attachmentsFlowThroughBulkDocsBulkGetAndChanges() throws {
        defer { server.stop() }
        let bulk = try server.json("POST", "/db/_bulk_docs", body: #"{"docs":[{"_id":"b","_attachments":{"x.bin":{"data":"AAEC"}}}]}"#)
        #expect(bulk.json[0]?["ok"] == true)
        let fetched = try server.json("POST", "/db/_bulk_get?attachments=true", body: #"{"docs":[{"id":"b"}]}"#).json
        #expect(fetched["results"]?[0]?["docs"]?[0]?["ok"]?["_attachments"]?["x.bin"]?["data"] == "AAEC")
        let changes = try server.json("GET", "/db/_changes?include_docs=true&attachments=true").json
        #expect(changes["results"]?[0]?["doc"]?["_attachments"]?["x.bin"]?["data"] == "AAEC")
        let stubs = try server.json("GET", "/db/_changes?include_docs=true").json
        #expect(stubs["results"]?[0]?["doc"]?["_attachments"]?["x.bin"]?["stub"] == true)
        // A replicated revision may carry stubs for attachments of its stored ancestor.
        let rev = try #require(bulk.json[0]?["rev"]?.stringValue)
        let replicated = try server.json("POST", "/db/_bulk_docs", body: #"""
            {"new_edits":false,"docs":[{"_id":"b","_rev":"2-abc","_revisions":{"start":2,"ids":["abc","\#(rev.dropFirst(2))"]},
             "_attachments":{"x.bin":{"stub":true,"revpos":1}}}]}
            """#)
        #expect(replicated.json == [])
        #expect(try server.request("GET", "/db/b/x.bin").body == [0, 1, 2])
    }

    @Test func deletingAndCompactingRemovesUnreferencedBodies() throws {
        defer { server.stop() }
        let first = try httpRequest(port: server.port, "PUT", "/db/doc/a.bin", body: Self.bytes(1000, seed: 3))
        let rev1 = try #require(try JSONValue.parse(first.body)["rev"]?.stringValue)
        #expect(try attachmentFiles().count == 1)
        #expect(try server.json("DELETE", "/db/doc/a.bin").status == 409)
        let deleted = try server.json("DELETE", "/db/doc/a.bin?rev=\(rev1)")
        #expect(deleted.status == 200)
        #expect(try server.request("GET", "/db/doc/a.bin").status == 404)
        // The old revision still refers to the body until compaction.
        #expect(try server.request("GET", "/db/doc/a.bin?rev=\(rev1)").status == 200)
        #expect(try attachmentFiles().count == 1)
        _ = try server.json("POST", "/db/_compact", body: "")
        var remaining = try attachmentFiles().count
        for _ in 0..<100 where remaining > 0 {
            usleep(20_000)
            remaining = try attachmentFiles().count
        }
        #expect(remaining == 0)
    }

    @Test func identicalContentIsStoredOnce() throws {
        defer { server.stop() }
        _ = try server.put("db", "a", #"{"_attachments":{"f":{"data":"aGVsbG8="}}}"#)
        _ = try server.put("db", "b", #"{"_attachments":{"g":{"data":"aGVsbG8="}}}"#)
        #expect(try attachmentFiles().count == 1)
        let (status, copy) = try server.json("COPY", "/db/a", headers: [("Destination", "c")])
        #expect(status == 201, "\(copy)")
        #expect(try server.request("GET", "/db/c/f").text == "hello")
        #expect(try attachmentFiles().count == 1)
    }
}

@Suite struct CompressedAttachmentTests {
    /// Peers such as CouchDB send compressible attachments gzip-encoded with
    /// `"encoding": "gzip"`; clients then get them decoded unless they accept gzip.
    @Test func gzipEncodedAttachmentsAreServedDecodedOrAsIs() throws {
        let server = try TestServer()
        defer { server.stop() }
        try server.createDatabase("db")
        let text = Array(String(repeating: "compressible text ", count: 200).utf8)
        let encoded = Gzip.compress(text)
        let digest = "md5-" + Base64.encode(Digest.md5(encoded))
        let body = #"""
            {"new_edits":false,"docs":[{"_id":"z","_rev":"1-a","_attachments":{"t.txt":{"content_type":"text/plain",
             "revpos":1,"digest":"\#(digest)","length":\#(text.count),"encoding":"gzip","data":"\#(Base64.encode(encoded))"}}}]}
            """#
        #expect(try server.json("POST", "/db/_bulk_docs", body: body).json == [])
        let plain = try server.request("GET", "/db/z/t.txt")
        #expect(plain.body == text)
        #expect(plain.header("Content-Encoding") == nil)
        let zipped = try server.request("GET", "/db/z/t.txt", headers: [("Accept-Encoding", "gzip, deflate")])
        #expect(zipped.header("Content-Encoding") == "gzip")
        #expect(zipped.body == encoded)
        let info = try server.json("GET", "/db/z?att_encoding_info=true").json["_attachments"]?["t.txt"]
        #expect(info?["encoding"] == "gzip")
        #expect(info?["encoded_length"]?.intValue == encoded.count)
        #expect(info?["length"]?.intValue == text.count)
        let inline = try server.json("GET", "/db/z?attachments=true").json["_attachments"]?["t.txt"]?["data"]?.stringValue
        #expect(inline.flatMap(Base64.decode) == text)
    }
}
