import Testing
@testable import CouchCore

/// Skips the whole of `text` with a cursor: nil if accepted, else the error.
private func skipError(_ text: String, maximumDepth: Int = 512) -> JSONParseError? {
    do {
        _ = try JSONCursor.read(Array(text.utf8)[...], maximumDepth: maximumDepth) { cursor throws(JSONParseError) in
            try cursor.skipValue()
        }
        return nil
    } catch {
        return error
    }
}

private func parses(_ text: String, maximumDepth: Int = 512) -> Bool {
    (try? JSONValue.parse(text, maximumDepth: maximumDepth)) != nil
}

@Suite struct JSONCursorTests {
    /// A skipped value is accepted exactly when the parser would accept it: a document passed on
    /// as its bytes is as valid as one parsed and written again.
    @Test(arguments: [
        "null", "true", "false", "0", "-0", "12.5e-3", "1E+9", "\"plain\"", "\"esc \\\" \\\\ \\/ \\b\\f\\n\\r\\t \\u00e9\"",
        "\"é漢字😀\"", "[]", "{}", "[1,[2,{\"a\":[]}]]", "{\"a\":1,\"b\":{\"c\":null}}", " [ 1 , 2 ] ",
        "{\"a\":1,\"a\":2}", "\"\u{7F}\"",
        // Refused:
        "", "nul", "tru", "01", "-", "1.", "1e", ".5", "+1", "\"open", "\"bad \\x escape\"", "\"\\u12\"",
        "\"tab\there\"", "[1,]", "[,1]", "[1 2]", "{\"a\" 1}", "{\"a\":}", "{1:2}", "{\"a\":1,}", "[1}", "{\"a\":1]",
        "[1] x",
    ])
    func acceptsWhatTheParserAccepts(text: String) {
        #expect((skipError(text) == nil) == parses(text), "\(text)")
    }

    @Test func refusesInvalidUTF8AndDeepNestingAsTheParserDoes() {
        for bytes in [[0x22, 0xC3, 0x22], [0x22, 0xED, 0xA0, 0x80, 0x22], [0x22, 0xFF, 0x22]] as [[UInt8]] {
            let skipped = (try? JSONCursor.read(bytes[...]) { cursor throws(JSONParseError) in try cursor.skipValue() }) != nil
            #expect(!skipped)
            #expect((try? JSONValue.parse(bytes)) == nil)
        }
        let deep = String(repeating: "[", count: 20) + String(repeating: "]", count: 20)
        #expect(skipError(deep, maximumDepth: 19) != nil)
        #expect(skipError(deep, maximumDepth: 20) == nil)
        #expect(parses(deep, maximumDepth: 20) && !parses(deep, maximumDepth: 19))
    }

    @Test func readsSomeMembersAndGivesTheBytesOfTheOthers() throws {
        let text = #"{ "id" : "a\"b", "doc": {"x": [1, 2], "y": "é"} , "n": 3 }"#
        let bytes = Array(text.utf8)[...]
        let (id, docRange, n) = try JSONCursor.read(bytes) { cursor throws(JSONParseError) -> (String?, Range<Int>?, JSONValue?) in
            var id: String?, doc: Range<Int>?, n: JSONValue?
            try cursor.enterObject()
            while let key = try cursor.nextMember() {
                switch key {
                case "id": id = try cursor.readValue().stringValue
                case "doc": doc = try cursor.skipValue()
                default: n = try cursor.readValue()
                }
            }
            return (id, doc, n)
        }
        #expect(id == "a\"b")
        #expect(n == .number(JSONNumber(text: "3")))
        let doc = try #require(docRange)
        #expect(String(decoding: bytes[doc], as: UTF8.self) == #"{"x": [1, 2], "y": "é"}"#)
    }

    @Test func walksArraysAndEmptyContainers() throws {
        let bytes = Array(#"[[], {}, [1], {"a": []}]"#.utf8)[...]
        let shapes = try JSONCursor.read(bytes) { cursor throws(JSONParseError) -> [String] in
            var shapes: [String] = []
            try cursor.enterArray()
            while try cursor.nextElement() {
                let start = cursor.valueStart()
                if bytes[start] == UInt8(ascii: "{") {
                    try cursor.enterObject()
                    var keys: [String] = []
                    while let key = try cursor.nextMember() {
                        keys.append(key)
                        _ = try cursor.skipValue()
                    }
                    shapes.append("{" + keys.joined(separator: ",") + "}")
                } else {
                    try cursor.enterArray()
                    var count = 0
                    while try cursor.nextElement() {
                        _ = try cursor.readValue()
                        count += 1
                    }
                    shapes.append("[\(count)]")
                }
                #expect(cursor.position > start)
            }
            return shapes
        }
        #expect(shapes == ["[0]", "{}", "[1]", "{a}"])
    }

    @Test func refusesMisplacedSeparatorsAndTrailingBytes() {
        for text in [#"{"a":1 "b":2}"#, #"{"a":1}}"#, #"{"a":1,}"#, #"{,"a":1}"#] {
            let result: Void? = try? JSONCursor.read(Array(text.utf8)[...]) { cursor throws(JSONParseError) in
                try cursor.enterObject()
                while try cursor.nextMember() != nil { _ = try cursor.skipValue() }
            }
            #expect(result == nil, "\(text)")
        }
        for text in ["[1,,2]", "[1 2]", "[1]]", "[1,]"] {
            let result: Void? = try? JSONCursor.read(Array(text.utf8)[...]) { cursor throws(JSONParseError) in
                try cursor.enterArray()
                while try cursor.nextElement() { _ = try cursor.readValue() }
            }
            #expect(result == nil, "\(text)")
        }
    }

    @Test func tellsWhenASkippedStringHadASurrogateEscape() throws {
        let flags = try JSONCursor.read(Array(#"["\u00e9", "\ud83d\ude00", "\udc00", "x"]"#.utf8)[...]) { cursor throws(JSONParseError) -> [Bool] in
            var flags: [Bool] = []
            try cursor.enterArray()
            while try cursor.nextElement() {
                cursor.skippedSurrogateEscape = false
                _ = try cursor.skipValue()
                flags.append(cursor.skippedSurrogateEscape)
            }
            return flags
        }
        #expect(flags == [false, true, true, false])
    }

    @Test func sliceRangesAreIndicesOfTheSlice() throws {
        let whole = Array("xx[\"abc\"]yy".utf8)
        let slice = whole[2..<9]
        let range = try JSONCursor.read(slice) { cursor throws(JSONParseError) -> Range<Int> in
            try cursor.enterArray()
            _ = try cursor.nextElement()
            let range = try cursor.skipValue()
            _ = try cursor.nextElement()
            return range
        }
        #expect(range == 3..<8)
        #expect(String(decoding: whole[range], as: UTF8.self) == "\"abc\"")
    }
}
