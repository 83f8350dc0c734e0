import CouchCore
import CouchTestSupport
import Foundation
import Testing

/// A written document keeps its body as the bytes it came in when those are what parsing and
/// writing it again would give: every document, whatever its bytes, is answered and stored
/// exactly as the same request read the usual way (here forced by giving a member twice, which
/// only the usual reading takes, or by a leading space), replicated (`new_edits: false`) or not.
@Suite struct BulkDocsBodiesAsSentTests {
    static let rev = "1-0123456789abcdef0123456789abcdef"

    static let documents: [String] = [
        #"{"_id":"plain","_rev":"\#(rev)","a":1,"b":[true,false,null],"c":{"d":"e"}}"#,
        #"{ "_id" : "spaced", "_rev":"\#(rev)", "a" : [1, 2] }"#,
        #"{"_id":"escapes","_rev":"\#(rev)","s":"caf\u00e9 \/ \" \\ \n \u0001 \ud83d\ude00 \ud800","t":"a\tb"}"#,
        #"{"_id":"slash","_rev":"\#(rev)","s":"a\/b"}"#,
        #"{"_id":"unicode","_rev":"\#(rev)","s":"caf\u00e9"}"#,
        #"{"_id":"space","_rev":"\#(rev)","a":{"b":1 }}"#,
        #"{"_id":"numbers","_rev":"\#(rev)","a":1.0E5,"b":-0,"c":1e-3,"d":123456789012345678901234567890}"#,
        #"{"_id":"twice","_rev":"\#(rev)","a":1,"a":2,"o":{"k":1,"k":{"x":2}}}"#,
        #"{"_id":5,"_id":"idtwice","_rev":"\#(rev)"}"#,
        #"{"_id":"special","_rev":"\#(rev)","_access":["x"],"_conflicts":[],"_replication_state":"done","z":"é😀"}"#,
        #"{"_id":"badspecial","_rev":"\#(rev)","_foo":1}"#,
        #"{"_id":"deleted","_rev":"\#(rev)","_deleted":true,"why":"gone"}"#,
        #"{"_id":"history","_revisions":{"start":3,"ids":["cc","bb","aa"]},"n":3}"#,
        #"{"_id":"attached","_rev":"\#(rev)","_attachments":{"a.txt":{"content_type":"text/plain","data":"aGk="}}}"#,
        #"{"_id":"keys","_rev":"\#(rev)","a\"b":1,"\u0061":2,"a":3}"#,
        #"{"_id":"_local/l","_rev":"0-1","x":1}"#,
        #"{"_id":"empty","_rev":"\#(rev)"}"#,
        #"{"_id":"deep","_rev":"\#(rev)","d":"# + String(repeating: "[", count: 501) + String(repeating: "]", count: 501) + "}",
        #"{"_id":"many","_rev":"\#(rev)","o":{"# + (0..<200).map { #""k\#($0)":\#($0)"# }.joined(separator: ",") + "}}",
        "5",
        #"{"_id":"norev","x":1}"#,
    ]

    /// A server with the databases `fast` (written to as usual) and `usual` (written to in a way
    /// only the usual reading takes).
    static func serverWithTwoDatabases() throws -> TestServer {
        let server = try TestServer()
        try server.createDatabase("fast")
        try server.createDatabase("usual")
        return server
    }

    @Test func eachNewEditIsAnsweredAndStoredAsTheUsualReadingDoes() throws {
        let server = try Self.serverWithTwoDatabases()
        defer { server.stop() }
        var written = 0
        for document in Self.documents {
            // New documents (no `_rev`), then an update of each one written.
            let new = document.replacingOccurrences(of: #""_rev":"\#(Self.rev)","#, with: "")
            let fast = try server.request("POST", "/fast/_bulk_docs", body: #"{"docs":[\#(new)]}"#)
            let usual = try server.request("POST", "/usual/_bulk_docs", body: #"{"docs":[\#(new)],"docs":[\#(new)]}"#)
            #expect(fast.status == usual.status && fast.text == usual.text, "\(new): \(fast.text) / \(usual.text)")
            guard let result = try? JSONValue.parse(fast.body)[0], let rev = result["rev"]?.stringValue,
                  let id = result["id"]?.stringValue, !id.hasPrefix("_local") else { continue }
            written += 1
            let update = #"{"docs":[{"_id":"\#(id)","_rev":"\#(rev)","n":2,"s":"x\ny","é":[1,2,300]}]}"#
            let updated = try server.request("POST", "/fast/_bulk_docs", body: update)
            #expect(updated.text == (try server.request("POST", "/usual/_bulk_docs", body: update)).text)
        }
        #expect(written >= 10)
        let listed = try server.request("GET", "/fast/_all_docs?include_docs=true&conflicts=true")
        #expect(listed.text == (try server.request("GET", "/usual/_all_docs?include_docs=true&conflicts=true")).text)
    }

    /// `PUT /db/doc` and `POST /db` read a body the same way (made not canonical by a leading space).
    @Test func eachDocumentPutOrPostedIsAnsweredAndStoredAsTheUsualReadingDoes() throws {
        let server = try Self.serverWithTwoDatabases()
        defer { server.stop() }
        var written = 0
        for (index, document) in Self.documents.enumerated() {
            let new = document.replacingOccurrences(of: #""_rev":"\#(Self.rev)","#, with: "")
            let fast = try server.request("PUT", "/fast/put-\(index)", body: new)
            let usual = try server.request("PUT", "/usual/put-\(index)", body: " " + new)
            #expect(fast.status == usual.status && fast.text == usual.text, "\(new): \(fast.text) / \(usual.text)")
            if fast.status == 201 { written += 1 }
            guard new.contains(#""_id""#), !new.contains("_local") else { continue }
            let posted = try server.request("POST", "/fast", body: new)
            #expect(posted.text == (try server.request("POST", "/usual", body: " " + new)).text, "\(new)")
        }
        #expect(written >= 10)
        let listed = try server.request("GET", "/fast/_all_docs?include_docs=true")
        #expect(listed.text == (try server.request("GET", "/usual/_all_docs?include_docs=true")).text)
    }

    @Test func eachReplicatedDocumentIsAnsweredAndStoredAsTheUsualReadingDoes() throws {
        let server = try Self.serverWithTwoDatabases()
        defer { server.stop() }
        for document in Self.documents {
            let fast = try server.request("POST", "/fast/_bulk_docs", body: #"{"new_edits":false,"docs":[\#(document)]}"#)
            let usual = try server.request("POST", "/usual/_bulk_docs",
                                           body: #"{"new_edits":false,"docs":[\#(document)],"new_edits":false}"#)
            #expect(fast.status == usual.status, "\(document)")
            #expect(fast.text == usual.text, "\(document)")
        }
        let ids = ["plain", "spaced", "escapes", "slash", "unicode", "space", "numbers", "twice", "idtwice", "special",
                   "badspecial", "deleted", "history", "attached", "keys", "_local/l", "empty", "deep", "many"]
        var found = 0
        for id in ids {
            let query = id.hasPrefix("_local") ? "" : "?revs=true&attachments=true&deleted=true"
            let fast = try server.request("GET", "/fast/\(id)\(query)")
            let usual = try server.request("GET", "/usual/\(id)\(query)")
            #expect(fast.status == usual.status && fast.text == usual.text, "\(id): \(fast.text) / \(usual.text)")
            if fast.status == 200 { found += 1 }
        }
        // What was written at all: most of them, and the same in both.
        #expect(found >= 10)
        #expect(try server.json("GET", "/fast").json["doc_count"] == server.json("GET", "/usual").json["doc_count"])
        // A stored body as a client reads it: the parser's value, written compactly.
        let escapes = try server.json("GET", "/fast/escapes").json
        #expect(escapes["s"] == JSONValue("café / \" \\ \n \u{1} 😀 \u{FFFD}"))
        let twice = try server.json("GET", "/fast/twice").json
        #expect(twice["a"] == 2 && twice["o"] == ["k": ["x": 2]])
    }

    @Test func aRequestOfManyDocumentsMixesBothReadings() throws {
        let server = try Self.serverWithTwoDatabases()
        defer { server.stop() }
        // Canonical documents and ones that are not, in one request of several chunks.
        let documents = (0..<300).map { index in
            index % 7 == 0 ? #"{"_id":"doc-\#(index)", "_rev":"\#(Self.rev)","n":\#(index)}"#
                           : #"{"_id":"doc-\#(index)","_rev":"\#(Self.rev)","n":\#(index),"s":"x\ny"}"#
        }.joined(separator: ",")
        // PouchDB's order: `new_edits` after the documents.
        let fast = try server.request("POST", "/fast/_bulk_docs", body: #"{"docs":[\#(documents)],"new_edits":false}"#)
        let usual = try server.request("POST", "/usual/_bulk_docs", body: #"{"docs":[\#(documents)],"new_edits":false,"new_edits":false}"#)
        #expect(fast.status == 201 && usual.status == 201 && fast.text == usual.text && fast.text == "[]\n")
        let listed = try server.request("GET", "/fast/_all_docs?include_docs=true")
        #expect(listed.text == (try server.request("GET", "/usual/_all_docs?include_docs=true")).text)
        #expect(try server.json("GET", "/fast").json["doc_count"] == 300)
    }
}
