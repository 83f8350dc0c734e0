import CouchCore
import CouchTestSupport
import Foundation
import Testing

/// Documents at the edges of what the server accepts: each is either refused at write time
/// with CouchDB's error, or replicates in both directions.
@Suite struct OddDocumentReplicationTests {
    /// `depth` objects, one inside the other.
    static func nested(_ depth: Int) -> String {
        String(repeating: #"{"a":"#, count: depth) + "1" + String(repeating: "}", count: depth)
    }

    @Test func dotIDsDeepDocumentsAndLongIDsReplicateOrAreRefused() async throws {
        let (a, b) = (try TestServer(), try TestServer())
        defer { a.stop(); b.stop() }
        try await a.call("PUT", "/source")
        // "." and ".." with attachments: libcurl must not read them as dot segments.
        for id in [".", ".."] {
            let put = try await a.call("PUT", "/source/\(id == "." ? "%2E" : "%2E%2E")",
                                       body: ["_attachments": ["a.txt": ["content_type": "text/plain", "data": "aGVsbG8="]]])
            #expect(put.status == 201, "\(put.json)")
        }
        // An ID with NUL is kept exactly: neither truncated nor aliased with "a".
        #expect(try await a.call("PUT", "/source/a", body: ["plain": true]).status == 201)
        #expect(try await a.call("PUT", "/source/a%00b", body: ["nul": true]).status == 201)
        // As deep as a document may nest (its own object is a level): accepted, and replicable.
        let deepest = try JSONValue.parse(Self.nested(JSONDepth.maximumDocument - 1))
        #expect(try await a.call("PUT", "/source/deep", body: ["v": deepest]).status == 201)
        // One level more is refused, naming the limit; so is a body the parser will not read.
        let tooDeep = try await offPool { try a.json("PUT", "/source/too-deep", body: #"{"v":\#(Self.nested(JSONDepth.maximumDocument))}"#) }
        #expect(tooDeep.status == 400)
        #expect(tooDeep.json["reason"] == JSONValue(JSONDepth.documentReason))
        let unreadable = try await offPool { try a.json("PUT", "/source/unreadable", body: Self.nested(600)) }
        #expect(unreadable.json["reason"] == JSONValue(JSONDepth.bodyReason))
        // An ID that could not travel in a URL is refused at write time.
        let long = String(repeating: "x", count: 70_000)
        let longPut = try await offPool { try a.json("POST", "/source", body: #"{"_id":"\#(long)"}"#) }
        #expect(longPut.status == 400)
        #expect(longPut.json == ["error": "illegal_docid", "reason": "Document id is too long"])

        // Push (local source, remote target), then pull back (remote source, local target).
        let push = try await a.replicate(["source": "source", "target": JSONValue("\(b.url)/pushed"), "create_target": true])
        #expect(push.json["ok"] == true, "\(push.json)")
        #expect(push.json["history"]?[0]?["doc_write_failures"] == 0)
        let pull = try await a.replicate(["source": JSONValue("\(b.url)/pushed"), "target": "pulled", "create_target": true])
        #expect(pull.json["ok"] == true, "\(pull.json)")
        for database in ["pushed", "pulled"] {
            let server = database == "pushed" ? b : a
            for id in ["%2E", "%2E%2E"] {
                let attachment = try await offPool { try server.request("GET", "/\(database)/\(id)/a.txt") }
                #expect(attachment.status == 200 && attachment.text == "hello", "\(database)/\(id)")
            }
            #expect(try await server.call("GET", "/\(database)/deep").json["v"] == deepest)
            #expect(try await server.call("GET", "/\(database)/a%00b").json["nul"] == true)
            #expect(try await server.call("GET", "/\(database)/a").json["plain"] == true)
            #expect(try await server.call("GET", "/\(database)").json["doc_count"] == 5)
        }
    }

    /// Documents are passed on as the bytes the source sent or stored (neither parsed nor written
    /// again): whatever their escapes, numbers, key order and history, each copy reads back
    /// byte for byte as the source's, through a push, a replication between two remote
    /// databases and a pull.
    @Test func documentsTravelUnchangedWhateverTheirJSON() async throws {
        let (a, b) = (try TestServer(), try TestServer())
        defer { a.stop(); b.stop() }
        try await a.call("PUT", "/source")
        let bodies = [
            "quotes": #"{"z":"say \"hi\" \\ / \b\f\n\r\t \u0001","a":1}"#,
            "unicode%C3%A9": #"{"text":"é 漢字 😀 \u00e9 \ud83d\ude00","é":["ü",{"ß":null}]}"#,
            "numbers": #"{"n":[0,-0,1.50,-2.5e-3,1E+9,12345678901234567890,0.1]}"#,
            "empty": "{}",
            "nested": #"{"a":{"b":{"c":[[[],{}],[{"d":[true,false,null]}]]}}}"#,
            "id%22with%22quotes": #"{"v":"\"\\"}"#,
        ]
        for (id, body) in bodies {
            #expect(try await offPool { try a.request("PUT", "/source/\(id)", body: body) }.status == 201, "\(id)")
        }
        // History and deletions travel too.
        var rev = try a.put("source", "edited", #"{"v":1}"#)
        for value in 2...4 { rev = try a.put("source", "edited", #"{"v":\#(value),"_rev":"\#(rev)"}"#) }
        let deleted = try a.json("DELETE", "/source/edited?rev=\(rev)")
        #expect(deleted.status == 200)
        let last = deleted.json["rev"]?.stringValue ?? ""

        let push = try await a.replicate(["source": "source", "target": JSONValue("\(b.url)/pushed"), "create_target": true])
        #expect(push.json["history"]?[0]?["docs_written"] == 7, "\(push.json)")
        let between = try await a.replicate(["source": JSONValue("\(b.url)/pushed"), "target": JSONValue("\(b.url)/copied"),
                                             "create_target": true])
        #expect(between.json["history"]?[0]?["docs_written"] == 7, "\(between.json)")
        let pull = try await a.replicate(["source": JSONValue("\(b.url)/copied"), "target": "pulled", "create_target": true])
        #expect(pull.json["history"]?[0]?["docs_written"] == 7, "\(pull.json)")

        for id in Array(bodies.keys) + ["edited"] {
            let path = "/source/\(id)?revs=true&deleted=true" + (id == "edited" ? "&rev=\(last)" : "")
            let original = try await offPool { try a.request("GET", path) }
            #expect(original.status == 200)
            for (server, database) in [(b, "pushed"), (b, "copied"), (a, "pulled")] {
                let copy = try await offPool { try server.request("GET", path.replacingOccurrences(of: "/source/", with: "/\(database)/")) }
                #expect(copy.text == original.text, "\(database)/\(id)")
            }
        }
    }
}
