import CouchCore
import Testing
@testable import CouchReplication

/// How the replicator reads a peer's `_bulk_get` answer: documents kept as the bytes they came
/// in, errors as missing or failed revisions, anything unreadable refused as a whole.
@Suite struct BulkGetAnswerTests {
    func results(_ text: String) -> [FetchResult]? {
        BulkGetAnswer.results(Array(text.utf8))
    }

    @Test func documentsAreKeptAsTheBytesTheyCameIn() throws {
        let doc = #"{"_id":"a","_rev":"2-b5","x": [1, 2.50],"_revisions":{"start":2,"ids":["b5","a4"]}}"#
        let attached = #"{"_attachments":{"f.txt":{"stub":true,"length":3}},"_rev":"1-c","_id":"b"}"#
        let answer = #"{"results": [{"id": "a", "docs": [{"ok": \#(doc)}]}, {"docs": [{"ok": \#(attached)}], "id": "b"}]}"#
        let fetched = try #require(results(answer))
        #expect(fetched.count == 2)
        guard case .found(let first) = fetched[0], case .found(let second) = fetched[1] else {
            Issue.record("\(fetched)")
            return
        }
        #expect(first.id == DocumentID("a") && first.revision.description == "2-b5")
        #expect(first.sourceJSON.map { String(decoding: $0, as: UTF8.self) } == doc)
        #expect(first.json == Array(doc.utf8))
        #expect(!first.hasAttachments && second.hasAttachments)
        #expect(first.document["x"] == [1, JSONValue.number(JSONNumber(text: "2.50"))])
        #expect(first.encodedSize == doc.utf8.count)
        // A document changed on its way is written from its members, no longer from its bytes.
        var changed = first
        changed.document["x"] = "new"
        #expect(changed.sourceJSON == nil)
        #expect(try JSONValue.parse(changed.json)["x"] == "new")
    }

    @Test func errorsNameTheirDocumentWhereverItsIDComes() throws {
        let answer = #"{"results":[{"docs":[{"error":{"id":"gone","rev":"3-x","error":"not_found","reason":"missing"}}],"id":"gone"},"#
            + #"{"id":"odd","docs":[{"error":{"rev":"1-y","error":"forbidden"}}]}]}"#
        let fetched = try #require(results(answer))
        guard fetched.count == 2, case .missing(let id, let revision) = fetched[0],
              case .failed(let failedID, let failedRevision, let error) = fetched[1] else {
            Issue.record("\(fetched)")
            return
        }
        #expect(id == DocumentID("gone") && revision.description == "3-x")
        #expect(failedID == DocumentID("odd") && failedRevision?.description == "1-y" && error == "forbidden")
    }

    /// A lone surrogate escape is decoded by the parser (to U+FFFD): such a document is parsed,
    /// so a target reads it as it would have before documents were passed on as they came.
    @Test func aSurrogateEscapeSendsTheParsedDocument() throws {
        let fetched = try #require(results(#"{"results":[{"id":"s","docs":[{"ok":{"_id":"s","_rev":"1-a","t":"\udc00"}}]}]}"#))
        guard case .found(let revision) = fetched.first else {
            Issue.record("\(fetched)")
            return
        }
        #expect(revision.sourceJSON == nil)
        #expect(revision.document["t"] == "\u{FFFD}")
    }

    @Test func anAnswerWithAnyInvalidJSONIsRefusedWhole() {
        #expect(results(#"{"results":[{"id":"a","docs":[{"ok":{"_id":"a","_rev":"1-a","x":01}}]}]}"#) == nil)
        #expect(results(#"{"results":[{"id":"a","docs":[{"ok":{"_id":"a","_rev":"1-a","x":"\x"}}]}]}"#) == nil)
        #expect(results(#"{"results":[{"id":"a","docs":[{"ok":{"_id":"a","_rev":"1-a"}}]}]} trailing"#) == nil)
        #expect(results(#"{"rows":[]}"#) == nil)
        #expect(results(#"[]"#) == nil)
        // A document without a readable `_id` and `_rev` is left out, as before.
        #expect(results(#"{"results":[{"id":"a","docs":[{"ok":{"_id":"a","_rev":"bad"}},{"ok":[]}]}]}"#)?.count == 0)
    }
}
