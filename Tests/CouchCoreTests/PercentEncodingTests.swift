import CouchCore
import Testing

/// URL parts as CouchDB writes and reads them.
@Suite struct PercentEncodingTests {
    @Test func documentPathsKeepTheSlashOfTheirPrefixOnly() {
        #expect(PercentEncoding.documentPath(DocumentID("a/b c")) == "a%2Fb%20c")
        #expect(PercentEncoding.documentPath(DocumentID("_design/x/y")) == "_design/x%2Fy")
        #expect(PercentEncoding.documentPath(DocumentID("_local/é")) == "_local/%C3%A9")
    }

    @Test func strictDecodingRefusesWhatIsNotAURLPart() {
        #expect(PercentDecoding.decode("a%2Fb+c", plusIsSpace: false) == "a/b+c")
        #expect(PercentDecoding.decode("a%2Fb+c", plusIsSpace: true) == "a/b c")
        #expect(PercentDecoding.decode("%4", plusIsSpace: false) == nil)
        #expect(PercentDecoding.decode("%+1", plusIsSpace: false) == nil)
        #expect(PercentDecoding.decode("%FF", plusIsSpace: false) == nil)
    }

    /// For text read whatever it holds (credentials in a peer's URL): what is not a valid
    /// `%XX` stays as written, and invalid UTF-8 is repaired rather than refused.
    @Test func lenientDecodingKeepsWhatItCannotDecode() {
        #expect(PercentDecoding.decodeLeniently("p%40ss%3Aword") == "p@ss:word")
        #expect(PercentDecoding.decodeLeniently("100%") == "100%")
        #expect(PercentDecoding.decodeLeniently("%4") == "%4")
        #expect(PercentDecoding.decodeLeniently("%+1%-1") == "%+1%-1")
        #expect(PercentDecoding.decodeLeniently("a+b") == "a+b")
        #expect(PercentDecoding.decodeLeniently("a+b%2B", plusIsSpace: true) == "a b+")
        #expect(PercentDecoding.decodeLeniently("%FFx") == "\u{FFFD}x")
    }
}
