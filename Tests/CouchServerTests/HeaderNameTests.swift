@testable import CouchServer
import Testing

/// Header names are ASCII tokens compared without regard to case (RFC 9110), by byte: what a
/// route reads or replaces must not depend on how a client or another route spelled the name.
@Suite struct HeaderNameTests {
    @Test func namesAreLoweredByteByByte() {
        #expect("Content-Type".headerNameLowercased == "content-type")
        #expect("X-Couch-Full-Commit-And-A-Long-Name".headerNameLowercased == "x-couch-full-commit-and-a-long-name")
        #expect("etag".headerNameLowercased == "etag")
        // Only A-Z change: no Unicode case mapping, other bytes kept.
        #expect("Ä-@[`{".headerNameLowercased == "Ä-@[`{")
    }

    @Test func namesMatchWhateverTheirCase() {
        #expect("Cache-Control".isSameHeaderName(as: "cache-control"))
        #expect("ETAG".isSameHeaderName(as: "ETag"))
        #expect(!"ETag".isSameHeaderName(as: "ETags"))
        // Bytes that differ by 0x20 but are not letters are different names.
        #expect(!"X@".isSameHeaderName(as: "X`"))
        #expect(!"X[".isSameHeaderName(as: "X{"))
        #expect(!"Ä".isSameHeaderName(as: "ä"))
    }

    @Test func aResponseHeaderIsFoundAndReplacedWhateverItsCase() {
        var response = HTTPResponse(status: 200, headers: [("Cache-Control", "no-cache"), ("ETag", "\"1\"")])
        #expect(response.header("cache-control") == "no-cache")
        response.setHeader("CACHE-CONTROL", "must-revalidate")
        #expect(response.headers.filter { $0.name.lowercased() == "cache-control" }.map(\.value) == ["must-revalidate"])
        #expect(response.header("etag") == "\"1\"")
    }
}
