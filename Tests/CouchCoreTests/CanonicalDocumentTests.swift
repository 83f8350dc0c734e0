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

    /// The term hashed into a revision ID, written from the bytes, is the parsed value's.
    @Test func termsWrittenFromBytesAreTheParsedValues() throws {
        var random = SeededRandom(seed: 31)
        var checked = 0
        for round in 0..<400 {
            var object = JSONObject()
            for index in 0..<random.next(8) { object["k\(index)\(Self.text(&random))"] = Self.value(&random, depth: 3) }
            if round % 3 == 0 { object["_id"] = JSONValue("d\(round)") }
            let bytes = JSONValue.object(object).serialized()
            let parsed = try DocumentEdit(json: JSONValue.parse(bytes))
            // The writer's `\u00XX` escapes are not canonical: those documents go the parser's way.
            guard let edit = try DocumentEdit(canonical: bytes[...]) else { continue }
            checked += 1
            #expect(edit.bodyTerm == parsed.bodyTerm, "\(String(decoding: bytes, as: UTF8.self))")
            #expect(edit.bodyBytes == parsed.bodyBytes)
            let parent = RevisionID("3-0123456789abcdef0123456789abcdef")
            #expect(edit.nextRevision(after: parent) == parsed.nextRevision(after: parent))
        }
        #expect(checked > 300)
    }

    static let numbers = ["0", "-0", "1", "255", "256", "-1", "65535", "65536", "2147483647", "2147483648", "-2147483649",
                          "9223372036854775807", "9223372036854775808", "-9223372036854775809",
                          "123456789012345678901234567890", "1.5", "-0.0", "1e3", "1E-3", "2.5e+10", "0.1"]

    static func value(_ random: inout SeededRandom, depth: Int) -> JSONValue {
        switch random.next(depth > 0 ? 9 : 6) {
        case 0: return .null
        case 1: return .bool(random.next(2) == 0)
        case 2, 3: return .number(JSONNumber(text: numbers[random.next(numbers.count)]))
        case 4, 5: return JSONValue(text(&random))
        case 6: return .array((0..<random.next(5)).map { _ in .number(JSONNumber(text: numbers[random.next(5)])) })
        case 7: return .array((0..<random.next(5)).map { _ in value(&random, depth: depth - 1) })
        default:
            var object = JSONObject()
            for index in 0..<random.next(5) { object["m\(index)"] = value(&random, depth: depth - 1) }
            return .object(object)
        }
    }

    static func text(_ random: inout SeededRandom) -> String {
        let pieces = ["a", "b", " ", "\"", "\\", "\n", "\t", "\r", "\u{8}", "\u{C}", "é", "😀", "/"]
        return (0..<random.next(6)).map { _ in pieces[random.next(pieces.count)] }.joined()
    }
}

/// A reproducible sequence (an LCG): the same documents on every run.
struct SeededRandom {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next(_ bound: Int) -> Int {
        state = state &* 6364136223846793005 &+ 1442695040888963407
        return Int((state >> 33) % UInt64(max(1, bound)))
    }
}
