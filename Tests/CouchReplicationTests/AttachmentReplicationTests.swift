import CouchCore
@testable import CouchReplication
import CouchTestSupport
import Foundation
import Testing

/// Attachments replicate as CouchDB's replicator copies them: fetched with `open_revs` as
/// `multipart/mixed` (only attachments newer than the target's possible ancestors),
/// written with `PUT ?new_edits=false` as `multipart/related` or through the store, byte
/// for byte, compressed bodies kept compressed.
@Suite(.serialized) struct AttachmentReplicationTests {
    /// Three megabytes that do not compress, the same every run.
    static let large: [UInt8] = bytes(count: 3 * 1024 * 1024, seed: 3)
    static let names = ["text.txt", "dir/ünïcode ñame.bin", "empty", "quote\"d %41\\.txt", "large.bin"]

    static func bytes(count: Int, seed: UInt64) -> [UInt8] {
        var generator = SplitMix(seed: seed)
        var bytes = [UInt8](repeating: 0, count: count)
        bytes.withUnsafeMutableBytes { buffer in
            let words = buffer.bindMemory(to: UInt64.self)
            for index in words.indices { words[index] = generator.next() }
        }
        return bytes
    }

    /// `doc-att` with five attachments (one empty, one large, names with `/`, Unicode,
    /// quotes, `%` and a backslash), ten small documents
    /// with one attachment each, and ten without.
    func fillWithAttachments(_ server: TestServer, _ database: String) async throws {
        try await server.call("PUT", "/\(database)")
        var rev = try await server.putAttachment(database, "doc-att", Self.names[0], rev: nil, Array("hello".utf8),
                                                 contentType: "text/plain")
        rev = try await server.putAttachment(database, "doc-att", Self.names[1], rev: rev, Self.bytes(count: 5000, seed: 1))
        rev = try await server.putAttachment(database, "doc-att", Self.names[2], rev: rev, [])
        rev = try await server.putAttachment(database, "doc-att", Self.names[3], rev: rev, Array("odd name".utf8))
        _ = try await server.putAttachment(database, "doc-att", Self.names[4], rev: rev, Self.large)
        var documents: [JSONValue] = []
        for index in 0..<10 {
            documents.append(["_id": JSONValue("small\(index)"), "n": JSONValue(index),
                              "_attachments": ["note.txt": ["content_type": "text/plain",
                                                            "data": JSONValue(Base64.encode(Array("note \(index)".utf8)))]]])
            documents.append(["_id": JSONValue("plain\(index)"), "n": JSONValue(index)])
        }
        try await server.putDocuments(database, documents)
    }

    /// Every attachment of the source's documents is on the target with the same bytes and metadata.
    func expectSameAttachments(_ source: TestServer, _ sourceDatabase: String, _ target: TestServer,
                               _ targetDatabase: String) async throws {
        #expect(try await source.revisionTrees(sourceDatabase) == target.revisionTrees(targetDatabase))
        let ids = ["doc-att"] + (0..<10).map { "small\($0)" }
        for id in ids {
            let original = try await source.call("GET", "/\(sourceDatabase)/\(id)?att_encoding_info=true").json
            let copy = try await target.call("GET", "/\(targetDatabase)/\(id)?att_encoding_info=true").json
            #expect(copy["_attachments"] == original["_attachments"], "\(id)")
            for name in original["_attachments"]?.objectValue?.keys ?? [] {
                let expected = try await source.attachment(sourceDatabase, id, name)
                let copied = try await target.attachment(targetDatabase, id, name)
                #expect(copied.status == 200)
                #expect(copied.body == expected.body, "\(id)/\(name)")
            }
        }
        #expect(try await target.attachment(targetDatabase, "doc-att", "large.bin").body == Self.large)
        // Nothing is left staged in the target's blob store, nor spooled.
        let staging = try target.databases.database(DatabaseName(targetDatabase)).attachments.directory + "/staging"
        #expect(try FileManager.default.contentsOfDirectory(atPath: staging) == [])
        // The spool directory is the whole process's: other suites' replications may be
        // spooling right now, but a file this one left would stay for good.
        let spool = TemporaryFileSpool.directory
        #expect(try await eventually(60) { ((try? FileManager.default.contentsOfDirectory(atPath: spool)) ?? []).isEmpty })
    }

    @Test func pushAndPullCopyEveryAttachmentByteForByte() async throws {
        let (a, b) = (try TestServer(), try TestServer())
        defer { a.stop(); b.stop() }
        try await fillWithAttachments(a, "source")
        // Push: local source, remote target.
        var (status, result) = try await a.replicate(["source": "source", "target": JSONValue(b.url + "/pushed"),
                                                      "create_target": true])
        #expect(status == 200, "\(result.serializedString())")
        #expect(result["history"]?[0]?["docs_written"] == 21)
        #expect(result["history"]?[0]?["doc_write_failures"] == 0)
        try await expectSameAttachments(a, "source", b, "pushed")
        // Pull: remote source, local target.
        (status, result) = try await b.replicate(["source": JSONValue(a.url + "/source"), "target": "pulled",
                                                  "create_target": true])
        #expect(status == 200, "\(result.serializedString())")
        #expect(result["history"]?[0]?["docs_written"] == 21)
        #expect(result["history"]?[0]?["doc_write_failures"] == 0)
        try await expectSameAttachments(a, "source", b, "pulled")
    }

    @Test func localToLocalAndRemoteToRemoteCopyEveryAttachment() async throws {
        let (a, b) = (try TestServer(), try TestServer())
        defer { a.stop(); b.stop() }
        try await fillWithAttachments(a, "source")
        var (status, result) = try await a.replicate(["source": "source", "target": "copy", "create_target": true])
        #expect(status == 200, "\(result.serializedString())")
        #expect(result["history"]?[0]?["docs_written"] == 21)
        try await expectSameAttachments(a, "source", a, "copy")
        // Both ends URLs: one of them this very server.
        (status, result) = try await a.replicate(["source": JSONValue(a.url + "/copy"), "target": JSONValue(b.url + "/mirror"),
                                                  "create_target": true])
        #expect(status == 200, "\(result.serializedString())")
        #expect(result["history"]?[0]?["docs_written"] == 21)
        #expect(result["history"]?[0]?["doc_write_failures"] == 0)
        try await expectSameAttachments(a, "source", b, "mirror")
    }

    /// The second replication of an edited document sends the unchanged attachments as
    /// stubs (`atts_since` the revision the target has), in both directions.
    @Test func anAttachmentKeptAcrossAnEditIsNotSentAgain() async throws {
        let (a, b) = (try TestServer(), try TestServer())
        defer { a.stop(); b.stop() }
        try await a.call("PUT", "/db")
        let big = Self.bytes(count: 1024 * 1024, seed: 9)
        var rev = try await a.putAttachment("db", "doc", "big.bin", rev: nil, big)
        let toTarget = try FaultyProxy(upstreamPort: b.port, faults: .init())
        let toSource = try FaultyProxy(upstreamPort: a.port, faults: .init())
        defer { toTarget.stop(); toSource.stop() }
        var (status, result) = try await a.replicate(["source": "db", "target": JSONValue(toTarget.url + "/pushed"),
                                                      "create_target": true])
        #expect(status == 200, "\(result.serializedString())")
        (status, result) = try await b.replicate(["source": JSONValue(toSource.url + "/db"), "target": "pulled",
                                                  "create_target": true])
        #expect(status == 200, "\(result.serializedString())")
        let firstPut = toTarget.requests.filter { $0.method == "PUT" && $0.path == "/pushed/doc" }
        #expect(firstPut.count == 1)
        #expect(firstPut.first.map { $0.body.count > big.count } == true)
        #expect(firstPut.first?.header("content-type")?.hasPrefix("multipart/related") == true)

        // Edit the body, keep the attachment, add a small one.
        var document = try await a.call("GET", "/db/doc").json.objectValue!
        document["edited"] = true
        rev = try await a.call("PUT", "/db/doc", body: .object(document)).json["rev"]!.stringValue!
        rev = try await a.putAttachment("db", "doc", "small.txt", rev: rev, Array("small".utf8), contentType: "text/plain")

        let pushedBefore = toTarget.requests.count
        (status, result) = try await a.replicate(["source": "db", "target": JSONValue(toTarget.url + "/pushed")])
        #expect(addedByLastRun(result, "docs_written") == 1, "\(result.serializedString())")
        let secondPut = toTarget.requests.dropFirst(pushedBefore).filter { $0.method == "PUT" && $0.path == "/pushed/doc" }
        #expect(secondPut.count == 1)
        #expect(secondPut.first.map { $0.body.count < 4096 } == true, "the large attachment was sent again")
        let sent = String(decoding: secondPut.first?.body ?? [], as: UTF8.self)
        #expect(sent.contains(#""stub":true"#))

        let pulledBefore = toSource.responses.count
        (status, result) = try await b.replicate(["source": JSONValue(toSource.url + "/db"), "target": "pulled"])
        #expect(addedByLastRun(result, "docs_written") == 1, "\(result.serializedString())")
        let fetches = toSource.responses.dropFirst(pulledBefore).filter { $0.target.hasPrefix("/db/doc?") }
        #expect(fetches.count == 1)
        #expect(fetches.first?.target.contains("atts_since=") == true)
        #expect(fetches.first.map { $0.bytes < 4096 } == true, "the large attachment was fetched again")

        for database in ["pushed", "pulled"] {
            let copy = try await b.call("GET", "/\(database)/doc").json
            #expect(copy["_rev"] == JSONValue(rev))
            #expect(copy["edited"] == true)
            #expect(try await b.attachment(database, "doc", "big.bin").body == big)
            #expect(try await b.attachment(database, "doc", "small.txt").body == Array("small".utf8))
        }
    }

    @Test func aDeletedAttachmentIsGoneFromTheTarget() async throws {
        let (a, b) = (try TestServer(), try TestServer())
        defer { a.stop(); b.stop() }
        try await a.call("PUT", "/db")
        var rev = try await a.putAttachment("db", "doc", "keep.txt", rev: nil, Array("keep".utf8), contentType: "text/plain")
        rev = try await a.putAttachment("db", "doc", "drop.txt", rev: rev, Array("drop".utf8), contentType: "text/plain")
        _ = try await a.replicate(["source": "db", "target": JSONValue(b.url + "/db"), "create_target": true])
        #expect(try await b.attachment("db", "doc", "drop.txt").status == 200)
        rev = try await a.call("DELETE", "/db/doc/drop.txt?rev=\(rev)").json["rev"]!.stringValue!
        let (_, result) = try await a.replicate(["source": "db", "target": JSONValue(b.url + "/db")])
        #expect(addedByLastRun(result, "docs_written") == 1, "\(result.serializedString())")
        let copy = try await b.call("GET", "/db/doc").json
        #expect(copy["_rev"] == JSONValue(rev))
        #expect(copy["_attachments"]?.objectValue?.keys.sorted() == ["keep.txt"])
        #expect(try await b.attachment("db", "doc", "drop.txt").status == 404)
        #expect(try await b.attachment("db", "doc", "keep.txt").body == Array("keep".utf8))
    }

    /// A body a peer stored gzip-encoded travels encoded and is stored as it was: same
    /// digest, same bytes to a client that accepts gzip, in every direction.
    @Test func aGzipEncodedAttachmentReplicatesByteIdentically() async throws {
        let (a, b) = (try TestServer(), try TestServer())
        defer { a.stop(); b.stop() }
        try await a.call("PUT", "/db")
        let text = Array(String(repeating: "compressible text ", count: 20_000).utf8)
        let encoded = Gzip.compress(text)
        let digest = "md5-" + Base64.encode(Digest.md5(encoded))
        try await a.putDocuments("db", [[
            "_id": "z", "_rev": "1-a",
            "_attachments": ["t.txt": ["content_type": "text/plain", "revpos": 1, "digest": JSONValue(digest),
                                       "length": JSONValue(text.count), "encoding": "gzip",
                                       "data": JSONValue(Base64.encode(encoded))]],
        ]], newEdits: false)
        _ = try await a.replicate(["source": "db", "target": JSONValue(b.url + "/pushed"), "create_target": true])
        _ = try await b.replicate(["source": JSONValue(a.url + "/db"), "target": "pulled", "create_target": true])
        _ = try await b.replicate(["source": "pulled", "target": "copied", "create_target": true])
        _ = try await a.replicate(["source": JSONValue(b.url + "/copied"), "target": JSONValue(b.url + "/mirror"),
                                   "create_target": true])
        for database in ["pushed", "pulled", "copied", "mirror"] {
            let info = try await b.call("GET", "/\(database)/z?att_encoding_info=true").json["_attachments"]?["t.txt"]
            #expect(info?["digest"] == JSONValue(digest), "\(database)")
            #expect(info?["encoding"] == "gzip", "\(database)")
            #expect(info?["encoded_length"]?.intValue == encoded.count, "\(database)")
            #expect(info?["length"]?.intValue == text.count, "\(database)")
            let zipped = try await b.attachment(database, "z", "t.txt", headers: [("Accept-Encoding", "gzip")])
            #expect(zipped.header("Content-Encoding") == "gzip", "\(database)")
            #expect(zipped.body == encoded, "\(database)")
            #expect(try await b.attachment(database, "z", "t.txt").body == text, "\(database)")
        }
    }

    /// Each branch of a conflict keeps its own attachments on both sides.
    @Test func conflictingBranchesKeepTheirOwnAttachments() async throws {
        let (a, b) = (try TestServer(), try TestServer())
        defer { a.stop(); b.stop() }
        try await a.call("PUT", "/db")
        let base = try await a.putAttachment("db", "doc", "shared.txt", rev: nil, Array("base".utf8), contentType: "text/plain")
        _ = try await a.replicate(["source": "db", "target": JSONValue(b.url + "/db"), "create_target": true])
        var leaves: [String: (rev: String, content: [UInt8])] = [:]
        for (server, side) in [(a, "a"), (b, "b")] {
            let content = Self.bytes(count: 200_000, seed: side == "a" ? 11 : 12)
            var rev = try await server.putAttachment("db", "doc", "shared.txt", rev: base, Array("changed on \(side)".utf8),
                                                     contentType: "text/plain")
            rev = try await server.putAttachment("db", "doc", "only-\(side).bin", rev: rev, content)
            leaves[side] = (rev, content)
        }
        _ = try await a.replicate(["source": "db", "target": JSONValue(b.url + "/db")])
        _ = try await a.replicate(["source": JSONValue(b.url + "/db"), "target": "db"])
        #expect(try await a.revisionTrees("db") == b.revisionTrees("db"))
        // Both leaves at once, in one open_revs answer, to new databases.
        let (_, fresh) = try await b.replicate(["source": JSONValue(a.url + "/db"), "target": "both", "create_target": true])
        #expect(fresh["history"]?[0]?["docs_written"] == 2, "\(fresh.serializedString())")
        let (_, local) = try await a.replicate(["source": "db", "target": "both", "create_target": true])
        #expect(local["history"]?[0]?["docs_written"] == 2, "\(local.serializedString())")
        #expect(try await a.revisionTrees("both") == b.revisionTrees("both"))
        for (server, database) in [(a, "db"), (b, "db"), (a, "both"), (b, "both")] {
            for (side, leaf) in leaves {
                let other = side == "a" ? "b" : "a"
                let document = try await server.call("GET", "/\(database)/doc?rev=\(leaf.rev)").json
                #expect(document["_attachments"]?.objectValue?.keys.sorted() == ["only-\(side).bin", "shared.txt"])
                #expect(document["_attachments"]?["only-\(other).bin"] == nil)
                let own = try await offPool { try server.request("GET", "/\(database)/doc/only-\(side).bin?rev=\(leaf.rev)") }
                #expect(own.body == leaf.content)
                let sharedText = try await offPool { try server.request("GET", "/\(database)/doc/shared.txt?rev=\(leaf.rev)") }
                #expect(sharedText.body == Array("changed on \(side)".utf8))
            }
        }
    }

    /// A target that has the ancestor revision but not its attachment answers `missing_stub`
    /// to a stub; the revision is then sent again with all its attachments.
    @Test func aMissingStubIsRetriedWithEveryAttachment() async throws {
        let (a, b) = (try TestServer(), try TestServer())
        defer { a.stop(); b.stop() }
        try await a.call("PUT", "/db")
        let first = try await a.putAttachment("db", "doc", "a.txt", rev: nil, Array("first".utf8), contentType: "text/plain")
        var document = try await a.call("GET", "/db/doc").json.objectValue!
        document["edited"] = true
        let second = try await a.call("PUT", "/db/doc", body: .object(document)).json["rev"]!.stringValue!
        // Both targets know the first revision, without its attachment.
        try await b.call("PUT", "/remote")
        try await b.putDocuments("remote", [["_id": "doc", "_rev": JSONValue(first)]], newEdits: false)
        try await b.call("PUT", "/local")
        try await b.putDocuments("local", [["_id": "doc", "_rev": JSONValue(first)]], newEdits: false)

        let proxy = try FaultyProxy(upstreamPort: b.port, faults: .init())
        defer { proxy.stop() }
        let push: JSONValue = ["source": "db", "target": JSONValue(proxy.url + "/remote")]
        let pull: JSONValue = ["source": JSONValue(a.url + "/db"), "target": "local"]
        for (server, body) in [(a, push), (b, pull)] {
            let (status, result) = try await server.replicate(body)
            #expect(status == 200, "\(result.serializedString())")
            #expect(result["history"]?[0]?["docs_written"] == 1, "\(result.serializedString())")
            #expect(result["history"]?[0]?["doc_write_failures"] == 0, "\(result.serializedString())")
        }
        // The stub was refused, then the revision went again with the attachment's body.
        let puts = proxy.requests.filter { $0.method == "PUT" && $0.path == "/remote/doc" }
        #expect(puts.count == 2)
        #expect(puts.first.map { String(decoding: $0.body, as: UTF8.self).contains(#""stub":true"#) } == true)
        #expect(puts.last?.header("content-type")?.hasPrefix("multipart/related") == true)
        for database in ["remote", "local"] {
            #expect(try await b.call("GET", "/\(database)/doc").json["_rev"] == JSONValue(second))
            #expect(try await b.attachment(database, "doc", "a.txt").body == Array("first".utf8))
        }
    }
    /// Fetches and multipart writes cut off or answered 500 at random are retried whole (the
    /// upload read again from its files), and every attachment arrives intact.
    @Test func attachmentsReplicateThroughAFaultyNetwork() async throws {
        let (a, b) = (try TestServer(), try TestServer())
        let faults = FaultyProxy.Faults(dropBefore: 0.08, dropAfter: 0.08, serverError: 0.08)
        let toSource = try FaultyProxy(upstreamPort: a.port, faults: faults, seed: 3)
        let toTarget = try FaultyProxy(upstreamPort: b.port, faults: faults, seed: 4)
        defer { a.replications.stopAll(); toSource.stop(); toTarget.stop(); a.stop(); b.stop() }
        a.replications.jobBackoff = Backoff(initialMilliseconds: 50, maximumMilliseconds: 200)
        try await a.call("PUT", "/source")
        try await b.call("PUT", "/target")
        var documents: [JSONValue] = []
        for index in 0..<24 {
            let body = Self.bytes(count: 300_000 + index, seed: UInt64(100 + index))
            documents.append(["_id": JSONValue("doc\(index)"),
                              "_attachments": ["a.bin": ["content_type": "application/octet-stream",
                                                         "data": JSONValue(Base64.encode(body))]]])
        }
        try await a.putDocuments("source", documents)
        let (status, result) = try await a.replicate([
            "source": JSONValue(toSource.url + "/source"), "target": JSONValue(toTarget.url + "/target"),
            "worker_batch_size": 8,
        ])
        #expect(status == 200)
        #expect(result["ok"] == true, "\(result.serializedString())")
        #expect(toSource.faultsInjected + toTarget.faultsInjected > 3, "the network really was faulty")
        #expect(try await a.revisionTrees("source") == b.revisionTrees("target"))
        for index in 0..<24 {
            let copy = try await b.attachment("target", "doc\(index)", "a.bin")
            #expect(copy.body == Self.bytes(count: 300_000 + index, seed: UInt64(100 + index)), "doc\(index)")
        }
    }

    /// A source that answers `open_revs` with JSON whatever the `Accept`: the attachments come
    /// inline and are written decoded.
    @Test func aSourceAnsweringOpenRevsWithJSONStillGivesEveryAttachment() async throws {
        let (a, b) = (try TestServer(), try TestServer())
        defer { a.stop(); b.stop() }
        try await a.call("PUT", "/db")
        let text = Array(String(repeating: "squeeze me ", count: 1000).utf8)
        let encoded = Gzip.compress(text)
        try await a.putDocuments("db", [[
            "_id": "z", "_rev": "1-a",
            "_attachments": ["t.txt": ["content_type": "text/plain", "revpos": 1,
                                       "digest": JSONValue("md5-" + Base64.encode(Digest.md5(encoded))),
                                       "length": JSONValue(text.count), "encoding": "gzip",
                                       "data": JSONValue(Base64.encode(encoded))]],
        ]], newEdits: false)
        let binary = Self.bytes(count: 70_000, seed: 5)
        _ = try await a.putAttachment("db", "plain", "b.bin", rev: nil, binary)
        let upstream = a.port
        let jsonOnly = try LoopbackHTTPServer { request in
            var headers: [(String, String)] = []
            for name in ["content-type", "accept"] {
                if let value = request.header(name) { headers.append((name, value)) }
            }
            if request.target.contains("open_revs=") { headers = headers.filter { $0.0 != "accept" } + [("accept", "application/json")] }
            guard let response = try? httpRequest(port: upstream, request.method, request.target, headers: headers,
                                                  body: request.body.isEmpty && request.method == "GET" ? nil : request.body)
            else { return .drop }
            return .respond(LoopbackHTTPServer.Response(
                status: response.status, headers: response.headers.filter { $0.name.lowercased() == "content-type" },
                body: response.body))
        }
        defer { jsonOnly.stop() }
        let (status, result) = try await b.replicate(["source": JSONValue(jsonOnly.url + "/db"), "target": "db",
                                                      "create_target": true])
        #expect(status == 200, "\(result.serializedString())")
        #expect(result["history"]?[0]?["docs_written"] == 2, "\(result.serializedString())")
        #expect(try await b.attachment("db", "z", "t.txt").body == text)
        #expect(try await b.attachment("db", "plain", "b.bin").body == binary)
        #expect(try await b.call("GET", "/db/plain").json["_attachments"] == a.call("GET", "/db/plain").json["_attachments"])
    }
}

extension TestServer {
    /// `PUT /db/doc/name` with raw bytes; returns the new revision.
    func putAttachment(_ database: String, _ id: String, _ name: String, rev: String?, _ bytes: [UInt8],
                       contentType: String = "application/octet-stream") async throws -> String {
        let path = "/\(database)/\(id)/\(Self.encoded(name))" + (rev.map { "?rev=\($0)" } ?? "")
        let port = self.port
        let response = try await offPool {
            try httpRequest(port: port, "PUT", path, headers: [("Content-Type", contentType)], body: bytes)
        }
        guard response.status == 201, let rev = try JSONValue.parse(response.body)["rev"]?.stringValue else {
            throw TestServerError.unexpected("PUT \(path): \(response.status) \(response.text)")
        }
        return rev
    }

    func attachment(_ database: String, _ id: String, _ name: String,
                    headers: [(String, String)] = []) async throws -> HTTPTestResponse {
        let path = "/\(database)/\(id)/\(Self.encoded(name))"
        return try await offPool { try self.request("GET", path, headers: headers) }
    }

    /// Every byte but ASCII letters and digits percent-encoded (`/` too).
    static func encoded(_ name: String) -> String {
        name.utf8.map { byte in
            (byte < 0x80 && (Character(Unicode.Scalar(byte)).isLetter || Character(Unicode.Scalar(byte)).isNumber))
                ? String(Unicode.Scalar(byte)) : String(format: "%%%02X", byte)
        }.joined()
    }
}

/// Large attachments stream through the replicator: read from the blob file as they are
/// sent, written into the blob store as they arrive, never held whole in memory.
@Suite struct LargeAttachmentReplicationTests {
    @Test func aLargeAttachmentReplicatesWithLittleMemoryEitherWay() async throws {
        let (a, b) = (try ServerProcess(arguments: ["--log-level", "warning"]),
                      try ServerProcess(arguments: ["--log-level", "warning"]))
        defer { a.stop(); b.stop() }
        #expect(try httpRequest(port: a.port, "PUT", "/db").status == 201)
        let size = 64 * 1024 * 1024
        let chunk = [UInt8](repeating: 0x5a, count: 1024 * 1024)
        let connection = try HTTPTestConnection(port: a.port, timeout: 60)
        try connection.writeRaw(Array("PUT /db/big/blob.bin HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\nContent-Length: \(size)\r\n\r\n".utf8))
        for _ in 0..<(size / chunk.count) { try connection.writeRaw(chunk) }
        #expect(try connection.readResponse().status == 201)
        connection.close()
        let (aBefore, bBefore) = (try #require(a.status("VmHWM")), try #require(b.status("VmHWM")))

        // Push from A (its blob file read as it is sent), then B pulls (bytes into its store as they come).
        let push = try httpRequest(port: a.port, "POST", "/_replicate", headers: [("Content-Type", "application/json")],
                                   body: Array(#"{"source":"db","target":"http://127.0.0.1:\#(b.port)/pushed","create_target":true}"#.utf8))
        #expect(push.status == 200, "\(push.text)")
        let pull = try httpRequest(port: b.port, "POST", "/_replicate", headers: [("Content-Type", "application/json")],
                                   body: Array(#"{"source":"http://127.0.0.1:\#(a.port)/db","target":"pulled","create_target":true}"#.utf8))
        #expect(pull.status == 200, "\(pull.text)")
        let (aAfter, bAfter) = (try #require(a.status("VmHWM")), try #require(b.status("VmHWM")))
        if Sanitizer.memoryFiguresAreMeaningful {
            #expect(aAfter - aBefore < 24 * 1024, "the pushing server's peak RSS grew from \(aBefore) kB to \(aAfter) kB")
            #expect(bAfter - bBefore < 24 * 1024, "the pulling server's peak RSS grew from \(bBefore) kB to \(bAfter) kB")
        }
        for database in ["pushed", "pulled"] {
            let head = try httpRequest(port: b.port, "HEAD", "/\(database)/big/blob.bin")
            #expect(head.status == 200)
            #expect(head.header("Content-Length") == String(size))
            let digest = try JSONValue.parse(httpRequest(port: b.port, "GET", "/\(database)/big").body)["_attachments"]?["blob.bin"]?["digest"]
            let original = try JSONValue.parse(httpRequest(port: a.port, "GET", "/db/big").body)["_attachments"]?["blob.bin"]?["digest"]
            #expect(digest != nil && digest == original)
        }
    }
}
