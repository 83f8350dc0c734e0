@testable import CouchCore
import Foundation
import Testing

/// Bytes `term_to_binary(Term, [{minor_version, 1}])` gives in Erlang, written out by hand
/// from the external term format's specification.
@Suite struct ExternalTermWriterTests {
    private func encoded(_ build: (inout ExternalTermWriter) -> Void) -> [UInt8] {
        var writer = ExternalTermWriter()
        build(&writer)
        return writer.bytes
    }

    @Test func atomsAndIntegersOfEverySize() {
        #expect(encoded { $0.bool(true) } == [131, 100, 0, 4, 116, 114, 117, 101])
        #expect(encoded { $0.integer(255) } == [131, 97, 255])
        #expect(encoded { $0.integer(256) } == [131, 98, 0, 0, 1, 0])
        #expect(encoded { $0.integer(-1) } == [131, 98, 255, 255, 255, 255])
        #expect(encoded { $0.integer(4_294_967_296) } == [131, 110, 5, 0, 0, 0, 0, 0, 1])
        #expect(encoded { $0.integer(-2_147_483_649) } == [131, 110, 4, 1, 1, 0, 0, 128])
        #expect(encoded { $0.integer(Int.min) } == [131, 110, 8, 1, 0, 0, 0, 0, 0, 0, 0, 128])
        // 2^64 from decimal text: nine base-256 digits.
        #expect(encoded { $0.integer(decimal: "18446744073709551616"[...].utf8) } == [131, 110, 9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1])
        #expect(encoded { $0.integer(decimal: "-300"[...].utf8) } == [131, 98, 255, 255, 254, 212])
    }

    @Test func floatsListsAndBodies() throws {
        #expect(encoded { $0.float(1.5) } == [131, 70, 63, 248, 0, 0, 0, 0, 0, 0])
        // A JSON array of small integers is a byte string (STRING_EXT); any other a list.
        #expect(encoded { $0.json([1, 2, 3]) } == [131, 107, 0, 3, 1, 2, 3])
        #expect(encoded { $0.json([1, 300]) } == [131, 108, 0, 0, 0, 2, 97, 1, 98, 0, 0, 1, 44, 106])
        #expect(encoded { $0.json([]) } == [131, 106])
        #expect(encoded { $0.json(try! JSONValue.parse(Array("1.0".utf8))) } == [131, 70, 63, 240, 0, 0, 0, 0, 0, 0])
        // {[{<<"a">>, null}]} and {[]}.
        #expect(encoded { $0.json(["a": nil]) } == [131, 104, 1, 108, 0, 0, 0, 1, 104, 2, 109, 0, 0, 0, 1, 97,
                                                    100, 0, 4, 110, 117, 108, 108, 106])
        #expect(encoded { $0.json([:]) } == [131, 104, 1, 106])
    }

    @Test func revisionDigestsAreHeldAsCouchDBHoldsThem() throws {
        let hex = try #require(RevisionID("1-806DB366BC1BA3EBEF40F4B7C63A53AF"))
        #expect(hex.description == "1-806db366bc1ba3ebef40f4b7c63a53af")
        #expect(hex.digestBinary.count == 16 && hex.digestBinary.first == 0x80)
        #expect(RevisionID("1-abc")?.digestBinary == Array("abc".utf8))
        #expect(RevisionID("1-")?.digest == "")
        // A hex digest compares as the bytes it encodes: 0x80... sorts after "a" (0x61).
        #expect(try #require(RevisionID("1-a")) < hex)
        #expect(try #require(RevisionID("1-0000000000000000000000000000000f")) < RevisionID("1-a")!)
    }
}

@Suite struct UpdateSequenceTests {
    @Test func base64URLIsRFC4648WithoutPadding() {
        for length in 0...10 {
            let bytes = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 97 &+ 251) }
            var encoded: [UInt8] = []
            UpdateSequence.appendBase64URL(bytes, to: &encoded)
            let expected = Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-")
                .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
            #expect(String(decoding: encoded, as: UTF8.self) == expected, "\(length) bytes")
        }
    }

    /// The sequence's term for any number, written on the stack for numbers of 32 bits, is the
    /// one `ExternalTermWriter` writes whole: at each bound of the integer's forms.
    @Test(arguments: [0, 1, 255, 256, 65_535, 70_000, Int(Int32.max), Int(Int32.max) + 1, Int.max])
    func everyNumbersTermIsTheWholeTermsEncoding(number: Int) {
        var term = ExternalTermWriter()
        term.listHeader(1)
        term.tupleHeader(3)
        term.atom("nonode@nohost")
        term.listHeader(2)
        term.integer(0)
        term.integer(4_294_967_295)
        term.endList()
        term.tupleHeader(3)
        term.integer(number)
        term.binary([UInt8]())
        term.atom("nonode@nohost")
        term.endList()
        let opaque = Data(term.bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
        #expect(UpdateSequence(number).description == "\(number)-\(opaque)")
    }

    @Test func writesCouchDBsFormAndReadsEveryForm() throws {
        // [{nonode@nohost, [0, 4294967295], {250, <<>>, nonode@nohost}}] in base64url, no padding.
        let text = UpdateSequence(250).description
        #expect(text == "250-g2wAAAABaANkAA1ub25vZGVAbm9ob3N0bAAAAAJhAG4EAP____9qaANh-m0AAAAAZAANbm9ub2RlQG5vaG9zdGo")
        #expect(UpdateSequence(70_000).description.hasPrefix("70000-g2wAAAABaANkAA1ub25vZGVAbm9ob3N0"))
        var json: [UInt8] = []
        UpdateSequence(3).appendJSON(to: &json)
        #expect(try JSONValue.parse(json) == UpdateSequence(3).json)
        for (raw, number) in [(text, 250), ("\"" + text + "\"", 250), ("12", 12), ("0", 0),
                              ("57-g1AAAAFTeJzLYWBgYMlgTmFQSElKzi9KdUhJMtbLTS3KLElMytFLzskvTUnNSy0uyi8", 57)] {
            #expect(UpdateSequence(parsing: raw)?.number == number, "\(raw)")
        }
        for raw in ["", "abc", "-1", "12x", "99999999999999999999"] {
            #expect(UpdateSequence(parsing: raw) == nil, "\(raw)")
        }
        #expect(UpdateSequence(json: 7)?.number == 7)
        #expect(UpdateSequence(json: "7-x")?.number == 7)
    }
}
