import CouchCore
@testable import CouchReplication
import CurlClient
import Foundation
import Testing

/// The multipart bodies of the attachment road, read and written without a server.
@Suite struct OpenRevisionsReaderTests {
    static let boundary = "outer"

    /// Feeds a body a few bytes at a time, so that delimiters fall across chunks.
    func read(_ body: [UInt8], chunk: Int = 7) throws -> [AttachedRevision] {
        let reader = OpenRevisionsReader(boundary: Self.boundary, spool: TemporaryFileSpool())
        var start = 0
        while start < body.count {
            try reader.append(Array(body[start..<min(body.count, start + chunk)]))
            start += chunk
        }
        return try reader.finish()
    }

    func content(_ body: AttachmentBody) throws -> [UInt8] {
        switch body.content {
        case .bytes(let bytes): return bytes
        case .spooled(let file): return [UInt8](try Data(contentsOf: URL(fileURLWithPath: file.path)))
        case .file(let path): return [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        case .blob(let blob): return [UInt8](try Data(contentsOf: URL(fileURLWithPath: blob.path)))
        }
    }

    @Test func readsMissingPlainAndRelatedPartsWithBodiesMatchedByNameOrOrder() throws {
        let document = #"{"_id":"d","_rev":"2-b","_revisions":{"start":2,"ids":["b","a"]},"_attachments":{"#
            + #""first":{"content_type":"text/plain","revpos":2,"digest":"md5-x","length":3,"follows":true},"#
            + #""kept":{"content_type":"text/plain","revpos":1,"digest":"md5-y","length":9,"stub":true},"#
            + #""q\"uote":{"content_type":"application/zip","revpos":2,"digest":"md5-z","length":40,"follows":true,"encoding":"gzip","encoded_length":5},"#
            + #""last":{"content_type":"text/plain","revpos":2,"digest":"md5-w","length":4,"follows":true}}}"#
        let related = "--inner\r\nContent-Type: application/json\r\n\r\n\(document)\r\n"
            + "--inner\r\nContent-Disposition: attachment; filename=\"q\\\"uote\"\r\nContent-Encoding: gzip\r\n\r\nzzzzz\r\n"
            + "--inner\r\nContent-Disposition: attachment; filename=\"first\"\r\n\r\none\r\n"
            + "--inner\r\n\r\nlast\r\n--inner--"
        let body = "--outer\r\nContent-Type: application/json; error=\"true\"\r\n\r\n{\"missing\":\"3-c\"}\r\n"
            + "--outer\r\nContent-Type: application/json\r\n\r\n{\"_id\":\"d\",\"_rev\":\"2-a\",\"n\":1}\r\n"
            + "--outer\r\nContent-Type: multipart/related; boundary=\"inner\"\r\n\r\n\(related)\r\n--outer--"
        for chunk in [1, 7, 4096] {
            let revisions = try read(Array(body.utf8), chunk: chunk)
            #expect(revisions.map(\.revision.revision.description) == ["2-a", "2-b"])
            #expect(revisions[0].bodies.isEmpty)
            let bodies = revisions[1].bodies
            #expect(bodies.map(\.name) == ["first", "q\"uote", "last"], "in the order of the JSON")
            #expect(try bodies.map { String(decoding: try content($0), as: UTF8.self) } == ["one", "zzzzz", "last"])
            #expect(bodies.map(\.encoding) == [nil, "gzip", nil])
            #expect(bodies.map(\.length) == [3, 5, 4])
            #expect(bodies[1].contentType == "application/zip")
        }
    }

    @Test func aBodyOfTheWrongLengthOrAMissingBodyIsAnError() throws {
        let document = #"{"_id":"d","_rev":"1-a","_attachments":{"a":{"content_type":"text/plain","revpos":1,"digest":"md5-x","length":3,"follows":true}}}"#
        let short = "--outer\r\nContent-Type: multipart/related; boundary=inner\r\n\r\n"
            + "--inner\r\nContent-Type: application/json\r\n\r\n\(document)\r\n--inner\r\n\r\nab\r\n--inner--\r\n--outer--"
        #expect(throws: ReplicationError.self) { try read(Array(short.utf8)) }
        let none = "--outer\r\nContent-Type: multipart/related; boundary=inner\r\n\r\n"
            + "--inner\r\nContent-Type: application/json\r\n\r\n\(document)\r\n--inner--\r\n--outer--"
        #expect(throws: ReplicationError.self) { try read(Array(none.utf8)) }
        let cut = "--outer\r\nContent-Type: application/json\r\n\r\n{\"_id\":\"d\",\"_rev\":\"2-a\"}\r\n"
        #expect(throws: ReplicationError.self) { try read(Array(cut.utf8)) }
    }

    /// What `MultipartRelatedBody` writes for a `PUT`, `RelatedDocumentReader` reads back.
    @Test func aWrittenMultipartRelatedBodyReadsBack() throws {
        let path = NSTemporaryDirectory() + "related-" + Digest.randomHex(bytes: 6)
        let large = (0..<100_000).map { UInt8(truncatingIfNeeded: $0 &* 13) }
        #expect(FileManager.default.createFile(atPath: path, contents: Data(large)))
        defer { unlink(path) }
        let names = ["plain.txt", "dir/ünï \"q\" %20\\.bin"]
        var attachments = JSONObject()
        attachments[names[0]] = ["content_type": "text/plain", "revpos": 1, "digest": "md5-a", "length": 5, "follows": true]
        attachments[names[1]] = ["content_type": "application/octet-stream", "revpos": 1, "digest": "md5-b",
                                 "length": JSONValue(large.count), "follows": true]
        let document: JSONObject = ["_id": "d", "_rev": "1-a", "_attachments": .object(attachments)]
        let attached = AttachedRevision(
            revision: ReplicatedRevision(document: document)!,
            bodies: [AttachmentBody(name: names[0], contentType: "text/plain", encoding: nil, length: 5,
                                    content: .bytes(Array("hello".utf8))),
                     AttachmentBody(name: names[1], contentType: "application/octet-stream", encoding: nil,
                                    length: large.count, content: .file(path: path))])
        let (contentType, upload) = MultipartRelatedBody.make(attached)
        var bytes: [UInt8] = []
        for piece in upload.pieces {
            switch piece {
            case .bytes(let part): bytes += part
            case .file(let file, let offset, let length):
                bytes += [UInt8](try Data(contentsOf: URL(fileURLWithPath: file)))[offset..<(offset + length)]
            }
        }
        #expect(bytes.count == upload.length)
        let boundary = try #require(MultipartReader.boundary(fromContentType: contentType))
        let reader = RelatedDocumentReader(boundary: boundary, spool: TemporaryFileSpool())
        try reader.append(bytes[...])
        let read = try reader.finish()
        #expect(read.revision.document == document)
        #expect(read.bodies.map(\.name) == names)
        #expect(try content(read.bodies[0]) == Array("hello".utf8))
        #expect(try content(read.bodies[1]) == large)
        // Names a peer could misread go percent-encoded; plain ones as they are.
        let text = String(decoding: bytes, as: UTF8.self)
        #expect(text.contains("filename=\"plain.txt\""))
        #expect(text.contains("filename=\"dir%2F%C3%BCn%C3%AF%20%22q%22%20%2520%5C.bin\""))
    }
}
