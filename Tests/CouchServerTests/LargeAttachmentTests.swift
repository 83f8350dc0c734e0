import CouchCore
import CouchTestSupport
import Foundation
import Testing

@Suite struct LargeAttachmentTests {
    /// A 100 MB upload streams to disk: the server's peak resident memory grows by far less.
    @Test func hundredMegabyteUploadKeepsServerMemoryLow() throws {
        let server = try ServerProcess(arguments: ["--log-level", "warning"])
        defer { server.stop() }
        #expect(try httpRequest(port: server.port, "PUT", "/db").status == 201)
        let before = try #require(server.status("VmHWM"))
        let size = 100 * 1024 * 1024
        let chunk = [UInt8](repeating: 0x5a, count: 1024 * 1024)
        let connection = try HTTPTestConnection(port: server.port, timeout: 60)
        try connection.writeRaw(Array("PUT /db/big/blob.bin HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\nContent-Length: \(size)\r\n\r\n".utf8))
        for _ in 0..<(size / chunk.count) { try connection.writeRaw(chunk) }
        let response = try connection.readResponse()
        #expect(response.status == 201, "\(response.text)")
        let after = try #require(server.status("VmHWM"))
        if Sanitizer.memoryFiguresAreMeaningful {
            #expect(after - before < 30 * 1024, "peak RSS grew from \(before) kB to \(after) kB")
        }

        let head = try httpRequest(port: server.port, "HEAD", "/db/big/blob.bin")
        #expect(head.header("Content-Length") == String(size))
        let tail = try httpRequest(port: server.port, "GET", "/db/big/blob.bin", headers: [("Range", "bytes=-4")])
        #expect(tail.body == [0x5a, 0x5a, 0x5a, 0x5a])
    }
}
