import CouchCore
import CouchServer
import CouchTestSupport
import Foundation
import Testing

/// Attachments of compressible types are stored gzip-compressed, as Apache CouchDB 3 stores
/// them, so the same edit gets the same digests and revision ID on both. The expected IDs
/// and digests below are what CouchDB 3.4.3 answered to the same requests.
@Suite struct CompressedStorageTests {
    static let text = Array(String(repeating: "hello hello hello hello world\n", count: 100).utf8)

    @Test func everyWayOfUploadingGivesCouchDBsDigestsAndRevisions() throws {
        let server = try TestServer()
        defer { server.stop() }
        try server.createDatabase("db")
        // Inline data, a compressible type beside one that is not.
        let inline = try server.json("PUT", "/db/d1", body: #"""
            {"a":1,"_attachments":{"t.txt":{"content_type":"text/plain","data":"\#(Base64.encode(Self.text))"},
             "b.bin":{"content_type":"application/octet-stream","data":"\#(Base64.encode(Array(0...255)))"}}}
            """#)
        #expect(inline.json["rev"] == "1-7c997ccb200d9a172e26a21b75669110")
        let stubs = try server.json("GET", "/db/d1?att_encoding_info=true").json["_attachments"]
        #expect(stubs?["t.txt"] == ["content_type": "text/plain", "revpos": 1, "digest": "md5-T22o54ZOyA7QhnMcsqfOPA==",
                                    "length": 3000, "stub": true, "encoding": "gzip", "encoded_length": 60])
        #expect(stubs?["b.bin"]?["digest"] == "md5-4shl20Fivtljv6qe9qwY8A==")
        #expect(stubs?["b.bin"]?["encoding"] == nil)

        // A standalone upload, streamed, with parameters in its type.
        let standalone = try httpRequest(port: server.port, "PUT", "/db/s/readme.txt",
                                         headers: [("Content-Type", "text/plain; charset=utf-8")],
                                         body: Array(String(repeating: "hello\n", count: 1000).utf8))
        #expect(standalone.status == 201)
        #expect(try JSONValue.parse(standalone.body)["rev"] == "1-0c4e5d25845db01a9f9e5d721395440d")
        let readme = try server.json("GET", "/db/s?att_encoding_info=true").json["_attachments"]?["readme.txt"]
        #expect(readme?["digest"] == "md5-/DPe4q1KJVBN6H5AzbVetw==")
        #expect(readme?["encoded_length"] == 52)

        // A multipart/related document (its part stored compressed once matched to its
        // attachment), then an attachment added to it.
        let json = Array(("{\"k\": [" + (0..<300).map(String.init).joined(separator: ", ") + "]}").utf8)
        let document = #"{"x":"y","_attachments":{"data.json":{"follows":true,"content_type":"application/json","length":\#(json.count)}}}"#
        let multipart = Array("--abc\r\nContent-Type: application/json\r\n\r\n\(document)\r\n--abc\r\n\r\n".utf8) + json
            + Array("\r\n--abc--".utf8)
        let related = try httpRequest(port: server.port, "PUT", "/db/m",
                                      headers: [("Content-Type", "multipart/related; boundary=\"abc\"")], body: multipart)
        #expect(try JSONValue.parse(related.body)["rev"] == "1-631d53385e390ef4473dd4762139f28e")
        let code = try httpRequest(port: server.port, "PUT", "/db/m/code.js?rev=1-631d53385e390ef4473dd4762139f28e",
                                   headers: [("Content-Type", "application/javascript")],
                                   body: Array(String(repeating: "function f() { return 1; }\n", count: 50).utf8))
        #expect(try JSONValue.parse(code.body)["rev"] == "2-b9bbfe10c5a507974d45429a36c86691")
        let both = try server.json("GET", "/db/m?att_encoding_info=true").json["_attachments"]
        #expect(both?["data.json"]?["digest"] == "md5-rkudaV+NXhdvSWf+NJGeTQ==")
        #expect(both?["data.json"]?["encoded_length"] == 582)
        #expect(both?["code.js"]?["digest"] == "md5-HSrihL9xVy6vgaUN5QEmzw==")
        #expect(try server.request("GET", "/db/m/data.json").body == json)
    }

    /// Served decoded, with its length, to a client that does not accept gzip; as stored to
    /// one that does; ranges only of attachments stored as sent.
    @Test func compressedBodiesAreServedDecodedOrAsStored() throws {
        let server = try TestServer()
        defer { server.stop() }
        try server.createDatabase("db")
        let large = Array(String(repeating: "a line of compressible text, number 1234567890\n", count: 120_000).utf8)
        var rev = try server.put("db", "doc", #"{"_attachments":{"t.txt":{"content_type":"text/plain","data":"\#(Base64.encode(Self.text))"}}}"#)
        let upload = try httpRequest(port: server.port, "PUT", "/db/doc/large.txt?rev=\(rev)",
                                     headers: [("Content-Type", "text/plain")], body: large)
        rev = try #require(JSONValue.parse(upload.body)["rev"]?.stringValue)
        let stub = try server.json("GET", "/db/doc?att_encoding_info=true").json["_attachments"]?["large.txt"]
        #expect(stub?["length"]?.intValue == large.count)
        #expect(stub?["digest"]?.stringValue == "md5-" + Base64.encode(Digest.md5(Gzip.compress(large))))
        let storedLength = try #require(stub?["encoded_length"]?.intValue)
        #expect(storedLength < large.count / 50)

        for headers in [[], [("Accept-Encoding", "deflate, gzip;q=0")], [("Accept-Encoding", "identity")]] {
            let plain = try server.request("GET", "/db/doc/large.txt", headers: headers + [("Range", "bytes=0-9")])
            #expect(plain.status == 200)
            #expect(plain.body == large)
            #expect(plain.header("Content-Length") == String(large.count))
            #expect(plain.header("Transfer-Encoding") == nil)
            #expect(plain.header("Content-Encoding") == nil)
            #expect(plain.header("Accept-Ranges") == "none")
        }
        for accepted in ["gzip", "gzip, deflate", "*", "br;q=1, gzip;q=0.5"] {
            let zipped = try server.request("GET", "/db/doc/large.txt", headers: [("Accept-Encoding", accepted)])
            #expect(zipped.header("Content-Encoding") == "gzip", "\(accepted)")
            #expect(zipped.body.count == storedLength, "\(accepted)")
            #expect(Gzip.decompress(zipped.body) == large, "\(accepted)")
        }
        // Inline data is decoded, with the encoding said when asked.
        let inline = try server.json("GET", "/db/doc?attachments=true&att_encoding_info=true").json["_attachments"]?["t.txt"]
        #expect(inline?["data"]?.stringValue.flatMap(Base64.decode) == Self.text)
        #expect(inline?["encoding"] == "gzip")
        #expect(inline?["encoded_length"] == 60)
        // A stub keeps the stored attachment: same digest, same bytes.
        let kept = try server.put("db", "doc", #"{"_rev":"\#(rev)","_attachments":{"t.txt":{"stub":true,"revpos":1}}}"#)
        #expect(kept.hasPrefix("3-"))
        #expect(try server.request("GET", "/db/doc/t.txt").body == Self.text)
    }

    @Test func compressionFollowsTheConfiguration() throws {
        var configuration = ServerConfiguration.testing()
        try configuration.apply(ConfigurationFile(text: """
            [attachments]
            compressible_types = application/x-log, image/svg*
            compression_level = 1
            """))
        let server = try TestServer(configuration: configuration)
        defer { server.stop() }
        try server.createDatabase("db")
        let data = Base64.encode(Self.text)
        _ = try server.put("db", "d", #"""
            {"_attachments":{"a.log":{"content_type":"application/x-log","data":"\#(data)"},
             "b.svg":{"content_type":"image/svg+xml","data":"\#(data)"},"c.txt":{"content_type":"text/plain","data":"\#(data)"}}}
            """#)
        let stubs = try server.json("GET", "/db/d?att_encoding_info=true").json["_attachments"]
        #expect(stubs?["a.log"]?["encoding"] == "gzip")
        #expect(stubs?["a.log"]?["digest"]?.stringValue == "md5-" + Base64.encode(Digest.md5(Gzip.compress(Self.text, level: 1))))
        #expect(stubs?["b.svg"]?["encoding"] == "gzip")
        #expect(stubs?["c.txt"]?["encoding"] == nil)
        #expect(try server.json("GET", "/_node/_local/_config/attachments/compression_level").json == "1")

        // Live: a level outside 1-9 stores every attachment as sent from now on.
        for level in ["0", "12"] {
            #expect(try server.json("PUT", "/_node/_local/_config/attachments/compression_level", body: #""\#(level)""#).status == 200)
            _ = try server.json("PUT", "/db/e\(level)", body: #"{"_attachments":{"a.log":{"content_type":"application/x-log","data":"\#(data)"}}}"#)
            #expect(try server.json("GET", "/db/e\(level)?att_encoding_info=true").json["_attachments"]?["a.log"]?["encoding"] == nil)
        }
        #expect(try server.json("PUT", "/_node/_local/_config/attachments/compression_level", body: #""high""#).status == 400)
    }

    /// Attachments a server stored as sent before it compressed keep working: read back,
    /// kept by stubs, and a later revision's attachments are compressed.
    @Test func attachmentsStoredUncompressedKeepWorking() throws {
        var configuration = ServerConfiguration.testing()
        configuration.attachmentCompression = AttachmentCompression(level: 0)
        let before = try TestServer(configuration: configuration)
        try before.createDatabase("db")
        let rev = try before.put("db", "old", #"{"_attachments":{"t.txt":{"content_type":"text/plain","data":"\#(Base64.encode(Self.text))"}}}"#)
        let digest = try before.json("GET", "/db/old").json["_attachments"]?["t.txt"]?["digest"]
        #expect(digest?.stringValue == "md5-" + Base64.encode(Digest.md5(Self.text)))
        before.stop(keepData: true)

        let after = try TestServer(directory: before.directory)
        defer { after.stop() }
        #expect(try after.request("GET", "/db/old/t.txt", headers: [("Accept-Encoding", "gzip")]).body == Self.text)
        let next = try after.put("db", "old", #"""
            {"_rev":"\#(rev)","_attachments":{"t.txt":{"stub":true},"new.txt":{"content_type":"text/plain","data":"aGVsbG8="}}}
            """#)
        let stubs = try after.json("GET", "/db/old?att_encoding_info=true").json["_attachments"]
        #expect(stubs?["t.txt"]?["digest"] == digest)
        #expect(stubs?["t.txt"]?["encoding"] == nil)
        #expect(stubs?["new.txt"]?["encoding"] == "gzip")
        #expect(next.hasPrefix("2-"))
    }

    /// A peer that stores such an attachment as sent replicates into a server that compresses
    /// it (its digest then differs, as on CouchDB), and later revisions' stubs still find it.
    @Test func anUncompressedPeerReplicatesIntoACompressingOne() throws {
        var configuration = ServerConfiguration.testing()
        configuration.attachmentCompression = AttachmentCompression(level: 0)
        let source = try TestServer(configuration: configuration)
        let target = try TestServer()
        defer { source.stop(); target.stop() }
        try source.createDatabase("db")
        let rev = try source.put("db", "doc", #"{"_attachments":{"t.txt":{"content_type":"text/plain","data":"\#(Base64.encode(Self.text))"}}}"#)
        let replicate = #"{"source":"http://127.0.0.1:\#(source.port)/db","target":"db","create_target":true}"#
        #expect(try target.json("POST", "/_replicate", body: replicate).json["history"]?[0]?["docs_written"] == 1)
        let copied = try target.json("GET", "/db/doc?att_encoding_info=true").json
        #expect(copied["_rev"]?.stringValue == rev)
        #expect(copied["_attachments"]?["t.txt"]?["digest"] == "md5-T22o54ZOyA7QhnMcsqfOPA==")
        #expect(copied["_attachments"]?["t.txt"]?["encoding"] == "gzip")

        _ = try source.put("db", "doc", #"{"_rev":"\#(rev)","v":2,"_attachments":{"t.txt":{"stub":true}}}"#)
        let again = try target.json("POST", "/_replicate", body: replicate).json
        #expect(addedByLastRun(again, "docs_written") == 1)
        #expect(again["history"]?[0]?["doc_write_failures"] == 0)
        #expect(try target.request("GET", "/db/doc/t.txt").body == Self.text)
        #expect(try target.json("GET", "/db/doc").json["v"] == 2)
    }
}
