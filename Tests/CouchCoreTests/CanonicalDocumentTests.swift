@testable import CouchCore
import Testing

/// A document read as canonical bytes (`DocumentEdit.init(canonical:)`, a replicator's
/// `_bulk_docs`) is the edit its parsed value gives, with the body kept as it came; bytes the
/// writer would not write as they are give nil, for the parser to read.
@Suite struct CanonicalDocumentTests {
    static let rev = "1-0123456789abcdef0123456789abcdef"

    static func edits(_ text: String) throws -> (canonical: DocumentEdit?, parsed: DocumentEdit) {
        let bytes = Array(text.utf8)
        return (try DocumentEdit(canonical: bytes[...]), try DocumentEdit(json: JSONValue.parse(bytes)))
    }

    @Test func canonicalDocumentsKeepTheirBytesAndReadAsParsed() throws {
        let documents = [
            #"{"_id":"d","_rev":"\#(Self.rev)","a":1,"b":[true,false,null],"c":{"d":"e"}}"#,
            #"{"a":1.0E5,"b":-0,"c":1e-3,"d":123456789012345678901234567890,"_id":"d","_rev":"\#(Self.rev)"}"#,
            #"{"_id":"d","_rev":"\#(Self.rev)","s":"tab\tquote\"slash\\nl\ncr\rbs\bff\f","é😀":"ü"}"#,
            #"{"_id":"d","_revisions":{"start":2,"ids":["aa","bb"]},"_deleted":true}"#,
            #"{"_id":"d","_rev":"\#(Self.rev)","_access":["x"],"_conflicts":[],"_replication_state":"done","z":{}}"#,
            #"{"_id":"d","_rev":"\#(Self.rev)","_attachments":{"a.txt":{"content_type":"text/plain","data":"aGk="}}}"#,
            #"{"_id":"d","_rev":"\#(Self.rev)","o":{"k":1,"l":{"k":2}},"k":[{"k":3},{"k":4}]}"#,
            #"{"_id":"d","_rev":"\#(Self.rev)"}"#,
            #"{}"#,
        ]
        for text in documents {
            let (canonical, parsed) = try Self.edits(text)
            let edit = try #require(canonical, "\(text)")
            #expect(edit.bodyBytes == parsed.bodyBytes, "\(text)")
            #expect(edit.body == parsed.body)
            #expect(edit.id == parsed.id && edit.revision == parsed.revision && edit.isDeleted == parsed.isDeleted)
            #expect(edit.history?.revisions == parsed.history?.revisions)
            #expect(edit.attachments == parsed.attachments)
            #expect(!edit.bodyNests(deeperThan: JSONDepth.maximumDocument) && edit.bodyNests(deeperThan: 0))
        }
    }

    @Test func bytesTheWriterWouldChangeAreLeftToTheParser() throws {
        let documents = [
            #"{ "_id":"d","a":1}"#,
            #"{"_id":"d","a":[1, 2]}"#,
            #"{"_id":"d","a":1}  "#,
            #"{"_id":"d","s":"caf\u00e9"}"#,
            #"{"_id":"d","s":"a\/b"}"#,
            #"{"_id":"d","s":"\ud800"}"#,
            #"{"_id":"d","a":1,"a":2}"#,
            #"{"_id":"d","o":{"k":1,"k":2}}"#,
            #"{"_id":5,"_id":"d"}"#,
            #"{"_id":"d","\u0061":1}"#,
            #"{"_id":"d","o":{"# + (0..<200).map { #""k\#($0)":\#($0)"# }.joined(separator: ",") + "}}",
            #"[1]"#,
        ]
        for text in documents {
            #expect(try DocumentEdit(canonical: Array(text.utf8)[...]) == nil, "\(text)")
        }
        let deep = String(repeating: #"{"a":"#, count: 10) + "1" + String(repeating: "}", count: 10)
        #expect(try DocumentEdit(canonical: Array(deep.utf8)[...], maximumDepth: 9) == nil)
        #expect(try DocumentEdit(canonical: Array(deep.utf8)[...], maximumDepth: 10) != nil)
    }

    @Test func specialMembersAreReadOnceTheDocumentIsKnownCanonical() throws {
        // A bad member's error is the parsed document's, whichever comes first.
        for text in [#"{"_id":5}"#, #"{"_foo":1}"#, #"{"_rev":"x"}"#, #"{"_attachments":[]}"#,
                     #"{"_id":"d","_revisions":{"start":"x"}}"#] {
            let canonical = Result { () throws(CouchError) in try DocumentEdit(canonical: Array(text.utf8)[...]) }
            let value = try JSONValue.parse(text)
            let parsed = Result { () throws(CouchError) in try DocumentEdit(json: value) }
            guard case .failure(let expected) = parsed, case .failure(let error) = canonical else {
                Issue.record("\(text) was accepted")
                continue
            }
            #expect(error.error == expected.error && error.reason == expected.reason, "\(text)")
        }
    }
}
