import CouchCore
import Testing

/// Which attachments CouchDB stores compressed, and the gzip stream it stores.
@Suite struct AttachmentCompressionTests {
    @Test func compressibleTypesMatchAsCouchDBsPatternsDo() {
        let defaults = AttachmentCompression()
        for type in ["text/plain", "Text/HTML", "text/plain; charset=utf-8", "  text/csv ", "text/x-c;x=1",
                     "application/json", "APPLICATION/JSON ; charset=utf-8", "application/javascript", "application/xml"] {
            #expect(defaults.compresses(contentType: type), "\(type)")
        }
        for type in ["application/json5", "application/octet-stream", "image/png", "textual/plain", "xtext/plain",
                     "application/json x", "application/xml+svg", ""] {
            #expect(!defaults.compresses(contentType: type), "\(type)")
        }
        // Only unencoded attachments are compressed; `identity` is unencoded.
        #expect(!defaults.compresses(contentType: "text/plain", encoding: "gzip"))
        #expect(defaults.compresses(contentType: "text/plain", encoding: "identity"))
        #expect(!defaults.compresses(contentType: nil))

        let custom = AttachmentCompression(types: " application/*+json ,, image/svg* ", level: 1)
        #expect(custom.compresses(contentType: "application/ld+json"))
        #expect(custom.compresses(contentType: "image/svg+xml"))
        #expect(!custom.compresses(contentType: "text/plain"))
        #expect(!AttachmentCompression(level: 0).compresses(contentType: "text/plain"))
        #expect(!AttachmentCompression(level: 10).compresses(contentType: "text/plain"))
        #expect(!AttachmentCompression(types: " , ").isEnabled)
    }

    /// The stream does not depend on how the input is cut (what makes a body streamed from
    /// the network, CouchDB's buffered writes and a body in memory give the same digest),
    /// starts with the header CouchDB's zlib writes (no name, time 0, Unix) and decodes back.
    @Test func streamsDoNotDependOnHowTheInputIsCut() throws {
        var input: [UInt8] = []
        for index in 0..<200_000 { input.append(contentsOf: "line \(index % 977) of some text\n".utf8) }
        let whole = Gzip.compress(input)
        #expect(Array(whole.prefix(10)) == [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3])
        for piece in [1, 4096, 65_537] {
            let compressor = GzipCompressor(level: 8)
            var output: [UInt8] = []
            var offset = 0
            input.withUnsafeBytes { bytes in
                while offset < bytes.count {
                    let end = min(bytes.count, offset + (piece == 1 ? Int.random(in: 1...9_000) : piece))
                    compressor.compress(UnsafeRawBufferPointer(rebasing: bytes[offset..<end])) { output.append(contentsOf: $0) }
                    offset = end
                }
                compressor.compress(UnsafeRawBufferPointer(rebasing: bytes[offset...]), finish: true) { output.append(contentsOf: $0) }
            }
            #expect(output == whole, "pieces of \(piece)")
        }
        #expect(Gzip.compress(input, level: 1) != whole)
        #expect(Gzip.compress([]).count == 20)

        let decompressor = GzipDecompressor()
        var decoded: [UInt8] = []
        for chunk in stride(from: 0, to: whole.count, by: 1000) {
            try whole[chunk..<min(whole.count, chunk + 1000)].withUnsafeBytes { bytes in
                try decompressor.decompress(bytes) { decoded.append(contentsOf: $0) }
            }
        }
        #expect(decompressor.isFinished)
        #expect(decoded == input)
    }

    @Test func corruptStreamsAreRefused() {
        var corrupt = Gzip.compress(Array("hello, hello, hello".utf8))
        corrupt[12] ^= 0xff
        #expect(throws: GzipDecompressor.Corrupt.self) {
            try corrupt.withUnsafeBytes { try GzipDecompressor().decompress($0) { _ in } }
        }
        #expect(throws: GzipDecompressor.Corrupt.self) {
            try Array("plain text".utf8).withUnsafeBytes { try GzipDecompressor().decompress($0) { _ in } }
        }
    }
}
