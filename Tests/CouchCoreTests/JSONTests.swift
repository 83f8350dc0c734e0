import Testing
@testable import CouchCore

/// Parses `text`, failing the test (not crashing) on error.
private func parse(_ text: String) throws -> JSONValue {
    try JSONValue.parse(text)
}

/// The error thrown while parsing `bytes`, or nil if it parsed.
private func parseError(_ bytes: [UInt8], maximumDepth: Int = 512) -> JSONParseError? {
    do {
        _ = try JSONValue.parse(bytes, maximumDepth: maximumDepth)
        return nil
    } catch {
        return error
    }
}

private func parseError(_ text: String) -> JSONParseError? {
    parseError(Array(text.utf8))
}

@Suite struct JSONTests {
    // MARK: Parsing basics

    @Test func parsesScalars() throws {
        #expect(try parse("null") == .null)
        #expect(try parse("true") == .bool(true))
        #expect(try parse("false") == .bool(false))
        #expect(try parse("\"hi\"") == .string("hi"))
        #expect(try parse("42").intValue == 42)
        #expect(try parse("-0").intValue == 0)
        #expect(try parse("1.5").doubleValue == 1.5)
        #expect(try parse("  \t\r\n 7 \n").intValue == 7)
    }

    @Test func parsesNestedStructure() throws {
        let v = try parse(#"{"a":[1,{"b":null}],"c":{"d":"e"}}"#)
        #expect(v["a"]?.arrayValue?.count == 2)
        #expect(v["a"]?.arrayValue?[1]["b"]?.isNull == true)
        #expect(v["c"]?["d"]?.stringValue == "e")
        #expect(v["missing"] == nil)
        #expect(JSONValue.string("x")["a"] == nil)
    }

    @Test func threeEntryPointsAgree() throws {
        let text = #"{"k":[1,2.5,"s",true,null]}"#
        let fromString = try JSONValue.parse(text)
        let fromArray = try JSONValue.parse(Array(text.utf8))
        let fromRaw = try Array(text.utf8).withUnsafeBytes { raw in try JSONValue.parse(raw) }
        #expect(fromString == fromArray)
        #expect(fromArray == fromRaw)
    }

    @Test(arguments: [
        #"{"a":1,"b":[true,null]}"#,
        #"[]"#,
        #"{}"#,
        #"[[],{},[{}],""]"#,
        #"{"z":1,"a":2,"m":{"y":[1.50,-0,1e3,2E-7]}}"#,
        #"{"big":123456789012345678901234567890,"neg":-98765432109876543210.000100}"#,
        #"["caf\u00e9 ☕️ 𝄞","a\"b\\c\n\t\r\b\f\u0001\u001f"]"#,
        #"{"":"empty key","\u0000":"nul key"}"#,
    ])
    func roundTripIsExact(text: String) throws {
        let value = try parse(text)
        let once = value.serializedString()
        // Re-parsing the output gives the same value and the same bytes again.
        let again = try parse(once)
        #expect(again == value)
        #expect(again.serializedString() == once)
    }

    @Test func compactOutputMatchesCouchDBStyle() throws {
        let v = try parse(#" { "a" : 1 , "b" : [ true , null ] } "#)
        #expect(v.serializedString() == #"{"a":1,"b":[true,null]}"#)
    }

    @Test func keyOrderIsPreserved() throws {
        let text = #"{"zeta":1,"alpha":2,"mid":3,"_id":"x"}"#
        let v = try parse(text)
        #expect(v.objectValue?.keys == ["zeta", "alpha", "mid", "_id"])
        #expect(v.serializedString() == text)
    }

    @Test func largeObjectsKeepOrderAndLookups() throws {
        // More members than the linear-scan threshold, so the index is used.
        let n = 100
        let body = (0..<n).reversed().map { "\"k\($0)\":\($0)" }.joined(separator: ",")
        let v = try parse("{\(body)}")
        let object = try #require(v.objectValue)
        #expect(object.count == n)
        #expect(object.keys.first == "k99")
        #expect(object.keys.last == "k0")
        for i in 0..<n { #expect(object["k\(i)"]?.intValue == i) }
        #expect(object["k100"] == nil)
    }

    @Test func numberTextIsPreserved() throws {
        let text = #"[123456789012345678901234567890,1.50,-0,1e3,1E+3,0.000001,-1.0e-10]"#
        let v = try parse(text)
        let numbers = try #require(v.arrayValue).compactMap { value -> String? in
            if case .number(let n) = value { return n.text }
            return nil
        }
        #expect(numbers == ["123456789012345678901234567890", "1.50", "-0", "1e3", "1E+3", "0.000001", "-1.0e-10"])
        #expect(v.serializedString() == text)
    }

    @Test func intValueIsStrict() throws {
        #expect(try parse("3").intValue == 3)
        #expect(try parse("-2").intValue == -2)
        #expect(try parse("3.0").intValue == nil)
        #expect(try parse("1e3").intValue == nil)
        #expect(try parse("123456789012345678901234567890").intValue == nil)
        #expect(try parse("\"3\"").intValue == nil)
        #expect(try parse("9223372036854775807").intValue == Int.max)
        #expect(try parse("9223372036854775808").intValue == nil)
        #expect(try parse("1e3").doubleValue == 1000)
    }

    // MARK: Strings

    @Test func everyEscapeDecodes() throws {
        let v = try parse(#""\"\\\/\b\f\n\r\t\u0041\u00e9\u20AC""#)
        #expect(v.stringValue == "\"\\/\u{8}\u{C}\n\r\tAé€")
    }

    @Test func surrogatePairsDecode() throws {
        #expect(try parse(#""\ud834\udd1e""#).stringValue == "𝄞")
        #expect(try parse(#""\uD83D\uDE00!""#).stringValue == "😀!")
    }

    @Test func loneSurrogatesBecomeReplacementCharacter() throws {
        #expect(try parse(#""\ud800""#).stringValue == "\u{FFFD}")
        #expect(try parse(#""a\udc00b""#).stringValue == "a\u{FFFD}b")
        #expect(try parse(#""\ud800x""#).stringValue == "\u{FFFD}x")
        // High surrogate followed by a non-surrogate escape: both are kept, the first replaced.
        #expect(try parse(#""\ud800\u0041""#).stringValue == "\u{FFFD}A")
        // Two high surrogates in a row.
        #expect(try parse(#""\ud800\ud800\udc00""#).stringValue == "\u{FFFD}𐀀")
    }

    @Test func rawUTF8IsAccepted() throws {
        let v = try parse("\"héllo wörld ☕️ 𝄞 日本語\"")
        #expect(v.stringValue == "héllo wörld ☕️ 𝄞 日本語")
    }

    @Test(arguments: [
        [0x22, 0xC3, 0x28, 0x22],  // invalid continuation byte
        [0x22, 0xC0, 0xAF, 0x22],  // overlong "/"
        [0x22, 0xE0, 0x80, 0xAF, 0x22],  // overlong 3-byte
        [0x22, 0xF0, 0x80, 0x80, 0xAF, 0x22],  // overlong 4-byte
        [0x22, 0xED, 0xA0, 0x80, 0x22],  // UTF-8 encoded surrogate U+D800
        [0x22, 0xF4, 0x90, 0x80, 0x80, 0x22],  // above U+10FFFF
        [0x22, 0xFF, 0x22],  // never valid
        [0x22, 0x80, 0x22],  // lone continuation byte
        [0x22, 0xE2, 0x82, 0x22],  // truncated sequence
        [0x22, 0x61, 0x61, 0x61, 0x61, 0x61, 0x61, 0x61, 0x61, 0x61, 0xF8, 0x22],  // after a SWAR-scanned run
    ] as [[UInt8]])
    func invalidUTF8IsRejected(bytes: [UInt8]) throws {
        let error = try #require(parseError(bytes))
        #expect(error.message == "invalid UTF-8")
        #expect(error.offset == bytes.firstIndex { $0 >= 0x80 })
    }

    @Test func invalidUTF8InsideEscapedStringIsRejected() throws {
        let error = try #require(parseError([0x22, 0x5C, 0x6E, 0xC3, 0x28, 0x22]))
        #expect(error.message == "invalid UTF-8")
        #expect(error.offset == 3)
    }

    @Test func controlCharactersMustBeEscaped() throws {
        let error = try #require(parseError("\"a\nb\""))
        #expect(error.offset == 2)
        #expect(parseError("\"a\u{1F}\"") != nil)
        #expect(parseError("\"abcdefghijklmn\topq\"") != nil)  // found by the 8-byte scan too
        #expect(try parse(#""a\u001fb""#).stringValue == "a\u{1F}b")
    }

    // MARK: Malformed input

    @Test(arguments: [
        ("", "empty input"),
        ("   \n", "empty input"),
        ("[1,]", "unexpected character ']'"),
        ("{\"a\":1,}", "expected string for object key"),
        ("[1 2]", "expected ',' or ']'"),
        ("{\"a\" 1}", "expected ':' after object key"),
        ("{\"a\":1 \"b\":2}", "expected ',' or '}'"),
        ("{a:1}", "expected string for object key"),
        ("01", "leading zeros are not allowed"),
        ("-01", "leading zeros are not allowed"),
        ("+1", "unexpected character '+'"),
        (".5", "unexpected character '.'"),
        ("1.", "invalid number"),
        ("1.e5", "invalid number"),
        ("1e", "invalid number"),
        ("1e+", "invalid number"),
        ("-", "invalid number"),
        ("-a", "invalid number"),
        ("NaN", "unexpected character 'N'"),
        ("Infinity", "unexpected character 'I'"),
        ("tru", "unexpected end of input"),
        ("trUe", "unexpected character 'U'"),
        ("nul", "unexpected end of input"),
        ("\"abc", "unterminated string"),
        ("\"abc\\", "unterminated string"),
        ("\"\\x\"", "invalid escape"),
        ("\"\\u12G4\"", "invalid \\u escape"),
        ("\"\\u12\"", "invalid \\u escape"),
        ("[1]x", "trailing characters after JSON value"),
        ("{} {}", "trailing characters after JSON value"),
        ("[", "unexpected end of input"),
        ("{\"a\":", "unexpected end of input"),
        ("// c\n1", "unexpected character '/'"),
        ("[1,/*x*/2]", "unexpected character '/'"),
        ("'a'", "unexpected character '''"),
        ("\u{0B}1", "unexpected byte 0xB"),
    ])
    func malformedInputIsRejected(text: String, message: String) throws {
        let error = try #require(parseError(text))
        #expect(error.message == message)
        #expect(error.offset >= 0 && error.offset <= text.utf8.count)
    }

    @Test func errorOffsetsPointAtTheProblem() throws {
        #expect(parseError("[1,]")?.offset == 3)
        #expect(parseError("  [1]  x")?.offset == 7)
        #expect(parseError("{\"a\":tx}")?.offset == 6)
        #expect(parseError("\"abc")?.offset == 0)
        #expect(parseError("[1,]")?.description == "unexpected character ']' at byte 3")
    }

    @Test func hostileNestingIsRejectedNotCrashing() throws {
        let deepArrays = [UInt8](repeating: UInt8(ascii: "["), count: 100_000)
        let error = try #require(parseError(deepArrays))
        #expect(error.message == "nesting too deep")
        #expect(error.offset == 512)

        let deepObjects = Array(String(repeating: "{\"a\":", count: 100_000).utf8)
        #expect(parseError(deepObjects)?.message == "nesting too deep")

        // A balanced document 100 000 deep is rejected the same way (and nothing leaks or crashes).
        let balanced = String(repeating: "[", count: 100_000) + String(repeating: "]", count: 100_000)
        #expect(parseError(balanced)?.message == "nesting too deep")
    }

    @Test func depthLimitIsExact() throws {
        let ok = String(repeating: "[", count: 512) + String(repeating: "]", count: 512)
        #expect(parseError(ok) == nil)
        let tooDeep = String(repeating: "[", count: 513) + String(repeating: "]", count: 513)
        #expect(parseError(tooDeep)?.message == "nesting too deep")
        #expect(parseError(Array("[[[1]]]".utf8), maximumDepth: 2)?.message == "nesting too deep")
        #expect(parseError(Array("[[1]]".utf8), maximumDepth: 2) == nil)
    }

    @Test func errorsInsideLargeContainersDoNotLeakOrCrash() throws {
        // The error is raised with many values on the parser's internal stacks.
        let text = "[" + (0..<1000).map { "{\"k\($0)\":[\($0),\"s\"]}" }.joined(separator: ",") + ",]"
        #expect(parseError(text)?.message == "unexpected character ']'")
    }

    // MARK: Duplicate keys

    @Test func duplicateKeysKeepLastValueAtFirstPosition() throws {
        let v = try parse(#"{"a":1,"b":2,"a":3}"#)
        let object = try #require(v.objectValue)
        #expect(object.keys == ["a", "b"])
        #expect(object["a"]?.intValue == 3)
        #expect(v.serializedString() == #"{"a":3,"b":2}"#)
    }

    @Test func duplicateKeysInLargeObjects() throws {
        let body = (0..<40).map { "\"k\($0)\":\($0)" }.joined(separator: ",")
        let v = try parse("{\(body),\"k5\":\"five\",\"k39\":null}")
        let object = try #require(v.objectValue)
        #expect(object.count == 40)
        #expect(object.keys[5] == "k5")
        #expect(object["k5"] == "five")
        #expect(object["k39"] == .null)
    }

    @Test func keysAreComparedByBytesNotCanonicalEquivalence() throws {
        // U+00E9 and e + U+0301 are canonically equivalent in Swift but distinct JSON keys.
        let v = try parse("{\"\u{E9}\":1,\"e\u{301}\":2}")
        let object = try #require(v.objectValue)
        #expect(object.count == 2)
        #expect(object["\u{E9}"]?.intValue == 1)
        #expect(object["e\u{301}"]?.intValue == 2)
        #expect(JSONValue.string("\u{E9}") != JSONValue.string("e\u{301}"))
    }

    // MARK: Canonical form

    @Test func canonicalFormSortsKeysByUTF8Bytes() throws {
        let v = try parse(#"{"b":1,"a":{"z":[{"y":1,"x":2}],"B":2},"é":3,"Z":4,"_id":5,"aa":6}"#)
        let canonical = String(decoding: v.canonicalBytes, as: UTF8.self)
        #expect(canonical == #"{"Z":4,"_id":5,"a":{"B":2,"z":[{"x":2,"y":1}]},"aa":6,"b":1,"é":3}"#)
        #expect(v.serializedString(keyOrder: .sorted) == canonical)
        // Order of the input does not matter for the canonical form.
        let shuffled = try parse(#"{"aa":6,"é":3,"_id":5,"Z":4,"a":{"B":2,"z":[{"x":2,"y":1}]},"b":1}"#)
        #expect(shuffled.canonicalBytes == v.canonicalBytes)
        // Numbers stay as received.
        #expect(try parse(#"{"n":1.50}"#).canonicalBytes == Array(#"{"n":1.50}"#.utf8))
    }

    @Test func canonicalSortsLargeObjects() throws {
        let keys = (0..<50).map { "key\(($0 * 37) % 50)" }
        let object = JSONObject(keys.map { (key: $0, value: JSONValue(1)) })
        let canonical = JSONValue.object(object).serializedString(keyOrder: .sorted)
        let expected = "{" + keys.sorted { Array($0.utf8).lexicographicallyPrecedes(Array($1.utf8)) }
            .map { "\"\($0)\":1" }.joined(separator: ",") + "}"
        #expect(canonical == expected)
    }

    // MARK: Writer

    @Test func writerEscapes() throws {
        var out: [UInt8] = []
        JSONWriter.appendString("a\"b\\c\n\r\t\u{8}\u{C}\u{0}\u{1F}/é☕️", to: &out)
        #expect(String(decoding: out, as: UTF8.self) == #""a\"b\\c\n\r\t\b\f\u0000\u001f/é☕️""#)

        var sub: [UInt8] = [0x5B]
        JSONWriter.appendString("xx\"yy"[...].dropFirst(), to: &sub)
        #expect(String(decoding: sub, as: UTF8.self) == #"["x\"yy""#)
    }

    /// A string needing no escape is appended as it is; one with a single byte to escape, at any
    /// place (inside the 8-byte words the check reads or in the bytes after them), is escaped.
    @Test func writerFindsTheOneByteToEscapeWherever() throws {
        for length in 1...20 {
            for place in 0..<length {
                for (special, escaped) in [("\"", #"\""#), ("\\", #"\\"#), ("\n", #"\n"#), ("\u{1}", #"\u0001"#),
                                           ("\u{1F}", #"\u001f"#), ("\u{7F}", "\u{7F}"), ("é", "é"), (" ", " ")] {
                    var text = String(repeating: "a", count: length)
                    let index = text.index(text.startIndex, offsetBy: place)
                    text.replaceSubrange(index...index, with: special)
                    var out: [UInt8] = [0x5B]
                    JSONWriter.appendString(text, to: &out)
                    let expected = "[\"" + text.replacingOccurrences(of: special, with: escaped) + "\""
                    #expect(String(decoding: out, as: UTF8.self) == expected, "\(length) \(place) \(escaped)")
                }
            }
        }
    }

    @Test func writerHandlesLongStringsAndGrowth() throws {
        // Longer than the writer's initial stack buffer, with escapes scattered through it.
        let long = String(repeating: "abcdefgh\"ijklmnop\n", count: 2000) + "é"
        let value = JSONValue.array([.string(long), .object(["k": .string(long)])])
        let bytes = value.serialized()
        #expect(try JSONValue.parse(bytes) == value)
        var prefixed: [UInt8] = [1, 2, 3]
        value.write(to: &prefixed)
        #expect(Array(prefixed.prefix(3)) == [1, 2, 3])
        #expect(Array(prefixed.dropFirst(3)) == bytes)
    }

    @Test func writesNumbersFromSwiftValues() {
        #expect(JSONValue(42).serializedString() == "42")
        #expect(JSONValue.number(JSONNumber(-7)).serializedString() == "-7")
        #expect(JSONValue.number(JSONNumber(1.0)).serializedString() == "1.0")
        #expect(JSONValue.number(JSONNumber(0.1)).serializedString() == "0.1")
        #expect(JSONValue(floatLiteral: 2.5).serializedString() == "2.5")
        #expect(JSONValue.number(JSONNumber(1e300)).serializedString() == "1e+300")
    }

    // MARK: Equality

    @Test func objectEqualityIgnoresOrder() throws {
        let a = try parse(#"{"x":1,"y":[1,2],"z":{"p":true,"q":null}}"#)
        let b = try parse(#"{"z":{"q":null,"p":true},"y":[1,2],"x":1}"#)
        #expect(a == b)
        #expect(a.hashValue == b.hashValue)
        #expect(Set([a, b]).count == 1)
        // Array order does matter.
        #expect(try parse("[1,2]") != parse("[2,1]"))
        #expect(try parse(#"{"x":1}"#) != parse(#"{"x":1,"y":2}"#))
        #expect(try parse(#"{"x":1}"#) != parse(#"{"x":2}"#))
        #expect(try parse(#"{"x":1}"#) != parse(#"{"y":1}"#))
    }

    @Test func numberEquality() throws {
        #expect(JSONNumber(text: "1.0") == JSONNumber(text: "1"))
        #expect(JSONNumber(text: "1e2") == JSONNumber(100))
        #expect(JSONNumber(text: "-0") == JSONNumber(text: "0"))
        #expect(JSONNumber(text: "1.0").hashValue == JSONNumber(text: "1").hashValue)
        #expect(JSONNumber(text: "1.5") != JSONNumber(text: "1.25"))
        #expect(JSONNumber(text: "1.50").text == "1.50")
        #expect(JSONValue.number(JSONNumber(text: "2")) == 2)
        #expect(JSONValue.number(JSONNumber(text: "2")) != "2")
    }

    @Test func differentKindsAreNotEqual() {
        let values: [JSONValue] = [.null, false, true, 0, 1, "", "0", [], [nil], [:], ["": nil]]
        for (i, a) in values.enumerated() {
            for (j, b) in values.enumerated() {
                #expect((a == b) == (i == j), "\(i) vs \(j)")
            }
        }
    }

    // MARK: Literals and accessors

    @Test func literalsBuildValues() throws {
        let v: JSONValue = ["b": 1, "a": [true, nil, "s", 2.5], "c": ["d": false]]
        #expect(v.objectValue?.keys == ["b", "a", "c"])
        #expect(v.serializedString() == #"{"b":1,"a":[true,null,"s",2.5],"c":{"d":false}}"#)
        #expect(v["a"]?.arrayValue?[0].boolValue == true)
        #expect(v["a"]?.arrayValue?[1].isNull == true)
        #expect(v["a"]?.arrayValue?[3].doubleValue == 2.5)
        #expect(v["c"]?["d"]?.boolValue == false)
        #expect(JSONValue("s") == .string("s"))
        #expect(JSONValue(5).intValue == 5)
        #expect(JSONValue(true).boolValue == true)
        #expect(JSONValue.null.stringValue == nil)
        #expect(JSONValue(1).boolValue == nil)
        #expect(JSONValue("x").objectValue == nil)
        #expect(JSONValue("x").arrayValue == nil)
        #expect(JSONValue(true).isNull == false)
    }

    // MARK: JSONObject API

    @Test func objectMutation() throws {
        var o = JSONObject()
        #expect(o.isEmpty)
        o["a"] = 1
        o["b"] = 2
        o["c"] = 3
        #expect(o.keys == ["a", "b", "c"])
        o["b"] = "two"  // replace in place
        #expect(o.keys == ["a", "b", "c"])
        #expect(o["b"] == "two")
        o["a"] = nil  // remove
        #expect(o.keys == ["b", "c"])
        o["a"] = 9  // new key appends at the end
        #expect(o.keys == ["b", "c", "a"])
        #expect(o.removeValue(forKey: "c") == 3)
        #expect(o.removeValue(forKey: "c") == nil)
        #expect(o.keys == ["b", "a"])
        #expect(o.contains("a"))
        #expect(!o.contains("c"))
        #expect(o.count == 2)
        o["zzz"] = nil  // removing an absent key is a no-op
        #expect(o.count == 2)
    }

    @Test func objectMutationAcrossIndexThreshold() throws {
        var o = JSONObject()
        for i in 0..<40 { o["k\(i)"] = JSONValue(i) }
        #expect(o.count == 40)
        for i in stride(from: 0, to: 40, by: 2) { #expect(o.removeValue(forKey: "k\(i)") == JSONValue(i)) }
        #expect(o.count == 20)
        #expect(o.keys.first == "k1")
        for i in 0..<40 { #expect(o["k\(i)"] == (i % 2 == 1 ? JSONValue(i) as JSONValue? : nil)) }
        o["k1"] = "one"
        #expect(o.keys.first == "k1")
        o["new"] = true
        #expect(o.keys.last == "new")
        #expect(o["new"] == true)
        // Copies are independent (value semantics).
        var copy = o
        copy["k1"] = nil
        #expect(o["k1"] == "one")
        #expect(copy["k1"] == nil)
    }

    @Test func objectInitFilterAndIteration() throws {
        let o = JSONObject([(key: "x", value: 1), (key: "y", value: 2), (key: "x", value: 3)])
        #expect(o.keys == ["x", "y"])
        #expect(o["x"] == 3)
        let literal: JSONObject = ["p": 1, "q": "s", "r": nil]
        #expect(literal.keys == ["p", "q", "r"])
        let filtered = literal.filter { $0.key != "q" }  // JSONObject's own filter, not Sequence's
        #expect(filtered.keys == ["p", "r"])
        #expect(filtered["r"] == .null)
        var seen: [String] = []
        for (key, _) in literal { seen.append(key) }
        #expect(seen == ["p", "q", "r"])
        #expect(literal.members.map(\.value) == [1, "s", nil])
        #expect(literal == ["r": nil, "p": 1, "q": "s"])
    }
}
