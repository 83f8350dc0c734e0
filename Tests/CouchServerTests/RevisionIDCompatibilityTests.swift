import CouchCore
import CouchTestSupport
import Foundation
import Testing

/// Revision IDs as Apache CouchDB 3 computes them (`couch_db:new_revid`). The first pair was
/// computed by CouchDB 3.4; the others by CouchDB's algorithm (MD5 of
/// `term_to_binary([Deleted, OldStart, OldRev, Body, Atts], [{minor_version, 1}])`) worked out
/// independently of this code.
@Suite struct RevisionIDCompatibilityTests {
    let server: TestServer

    init() throws {
        server = try TestServer()
        try server.createDatabase("db")
    }

    @Test func newUpdateAndDeleteMatchCouchDB() throws {
        defer { server.stop() }
        let first = try server.put("db", "doc", #"{"v":"1"}"#)
        #expect(first == "1-806db366bc1ba3ebef40f4b7c63a53af")
        let second = try server.put("db", "doc", #"{"_rev":"\#(first)","v":"2"}"#)
        #expect(second == "2-8ef50bd631ee32d350edd37cd66f2e31")
        // DELETE writes `{"_deleted": true}` alone: an empty body, no attachments.
        let (status, deleted) = try server.json("DELETE", "/db/doc?rev=\(second)")
        #expect(status == 200)
        #expect(deleted["rev"] == "3-06c14718be9fa2860524d88c587a491b")
        // The same edit on another node gives the same revision: no false conflict.
        #expect(try server.put("db", "twin", #"{"v":"1"}"#) == first)
    }

    @Test func bodiesOfEveryShape() throws {
        defer { server.stop() }
        let numbers = #"{"i":1,"n":-1,"b":256,"big":4294967296,"huge":123456789012345678901234567890,"#
            + #""neg":-123456789012345678901234567890,"f":1.5,"e":1e3,"z":-0.0,"l":[1,2,3],"m":[1,300],"#
            + #""empty":[],"o":{},"t":true,"f2":false,"nul":null}"#
        #expect(try server.put("db", "numbers", numbers) == "1-15e6ffd46a3f7d91bce85254b85313fe")
        #expect(try server.put("db", "unicode", #"{"ü":"日本","emoji":"\ud83d\ude00 \"q\""}"#)
                == "1-601d818894b201f850867e199dd17911")
        #expect(try server.put("db", "nested", #"{"a":{"b":{"c":[{"d":1}]}}}"#) == "1-b0466cd0b802fc9883e6deb4d000c823")
        // Attachments count by name, type and MD5, in the reverse of the document's order.
        let png = Data([0x89, 0x50, 0x4e, 0x47]).base64EncodedString()
        let hello = Data("hello".utf8).base64EncodedString()
        let withAttachments = #"{"k":"v","_attachments":{"a.bin":{"data":"\#(hello)"},"#
            + #""b.png":{"content_type":"image/png","data":"\#(png)"}}}"#
        #expect(try server.put("db", "atts", withAttachments) == "1-abca4bcb25b6b8d9b39e5c4d4578c3d6")
        // Standalone attachments: a new one goes first in the document's list (so last in the hash).
        let octets = [("Content-Type", "application/octet-stream")]
        let blob = try server.json("PUT", "/db/files/blob.bin", headers: octets, body: "hello")
        #expect(blob.json["rev"] == "1-36c494bb15d09a1c2af9dab7718a3b8a")
        let image = try server.request("PUT", "/db/files/img.png?rev=1-36c494bb15d09a1c2af9dab7718a3b8a",
                                       headers: [("Content-Type", "image/png")], body: "PNG!")
        #expect(try JSONValue.parse(image.body)["rev"] == "2-2c8b5d1b0aa5950998e2fa0cb5da84b6")
        let removed = try server.json("DELETE", "/db/files/blob.bin?rev=2-2c8b5d1b0aa5950998e2fa0cb5da84b6")
        #expect(removed.json["rev"] == "3-1efa1da1513525cda31d4200c3abd25d")
        // A parent whose digest is not hex is hashed as its text.
        let (replicated, _) = try server.json("PUT", "/db/nonhex?new_edits=false", body: #"{"_rev":"1-abc","v":"w"}"#)
        #expect(replicated == 201)
        #expect(try server.put("db", "nonhex", #"{"_rev":"1-abc","v":"x"}"#) == "2-0e755a535fd6ca6aeb5b2a41df05e853")
    }

    /// The ID is hashed before the writer with the parent the edit names; when the writer finds
    /// another parent (a deleted document recreated without `_rev` follows its deleted leaf),
    /// the ID must be the one that parent gives, as when the edit names it.
    @Test func aParentFoundByTheWriterGivesTheSameIDAsANamedOne() throws {
        defer { server.stop() }
        try server.createDatabase("other")
        var deletedLeaves: [String] = []
        for db in ["db", "other"] {
            let first = try server.put(db, "doc", #"{"v":"1"}"#)
            let (status, deleted) = try server.json("DELETE", "/\(db)/doc?rev=\(first)")
            #expect(status == 200)
            deletedLeaves.append(try #require(deleted["rev"]?.stringValue))
        }
        #expect(deletedLeaves[0] == deletedLeaves[1])
        let recreated = try server.put("db", "doc", #"{"v":"again"}"#)
        let named = try server.put("other", "doc", #"{"_rev":"\#(deletedLeaves[1])","v":"again"}"#)
        #expect(recreated.hasPrefix("3-"))
        #expect(recreated == named)
        // Another body after the same parent gets another ID.
        #expect(try server.put("db", "doc", #"{"_rev":"\#(recreated)","v":"x"}"#)
                != (try server.put("other", "doc", #"{"_rev":"\#(named)","v":"y"}"#)))
    }
}
