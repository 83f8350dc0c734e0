import CouchCore
import Testing

/// The streaming multipart reader, fed whole and byte by byte.
@Suite struct MultipartReaderTests {
    final class Collector: MultipartReader.Delegate {
        var parts: [(headers: [String: String], body: [UInt8])] = []
        func beginPart(headers: [String: String]) throws { parts.append((headers, [])) }
        func partData(_ bytes: ArraySlice<UInt8>) throws { parts[parts.count - 1].body += bytes }
        func endPart() throws {}
    }

    private func read(_ body: [UInt8], boundary: String, chunk: Int) throws -> [(headers: [String: String], body: [UInt8])] {
        let collector = Collector()
        let reader = MultipartReader(boundary: boundary, delegate: collector)
        var offset = 0
        while offset < body.count {
            try reader.append(Array(body[offset..<min(body.count, offset + chunk)]))
            offset += chunk
        }
        try reader.finish()
        return collector.parts
    }

    /// Parts without headers whose next delimiter is already buffered: the next part's
    /// CRLF CRLF must not be taken for the end of this part's headers (it once was, and an
    /// upload lost its second attachment depending on how the bytes arrived).
    @Test func partsWithoutHeadersWhateverTheChunking() throws {
        let first = Array("first body\r\nwith lines".utf8)
        let second = Array("second".utf8)
        let body = Array("--b\r\nContent-Type: application/json\r\n\r\n{}\r\n--b\r\n\r\n".utf8) + first
            + Array("\r\n--b\r\n\r\n".utf8) + second + Array("\r\n--b--".utf8)
        for chunk in [1, 2, 3, 7, 16, body.count] {
            let parts = try read(body, boundary: "b", chunk: chunk)
            #expect(parts.count == 3, "chunk \(chunk)")
            guard parts.count == 3 else { continue }
            #expect(parts[0].headers["content-type"] == "application/json")
            #expect(parts[0].body == Array("{}".utf8))
            #expect(parts[1].headers.isEmpty && parts[1].body == first, "chunk \(chunk)")
            #expect(parts[2].headers.isEmpty && parts[2].body == second, "chunk \(chunk)")
        }
    }

    @Test func anUnclosedBodyIsRefused() throws {
        #expect(throws: MultipartError.self) { try read(Array("--b\r\n\r\nabc".utf8), boundary: "b", chunk: 4) }
    }
}
