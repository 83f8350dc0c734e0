import CouchCore
import CouchServer
import CouchTestSupport
import Foundation
import Testing

/// Request bodies that trickle in, and bad heads on a connection kept alive after a first
/// good request.
@Suite struct HostileBodyTests {
    /// A connected loopback socket, with a receive timeout.
    static func connect(port: Int, timeout: Double = 5) -> Int32 {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        _ = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Foundation.connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        var time = timeval(tv_sec: Int(timeout), tv_usec: Int((timeout - Double(Int(timeout))) * 1e6))
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &time, socklen_t(MemoryLayout<timeval>.size))
        return descriptor
    }

    static func send(_ descriptor: Int32, _ text: String) -> Bool {
        Array(text.utf8).withUnsafeBytes { Foundation.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) } > 0
    }

    /// Whether the server has closed the connection (without waiting).
    static func closedByServer(_ descriptor: Int32) -> Bool {
        var byte: UInt8 = 0
        let count = recv(descriptor, &byte, 1, Int32(MSG_DONTWAIT | MSG_PEEK))
        return count == 0 || (count < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
    }

    /// Sends `head` then the body a byte every 50 ms, and returns the seconds until the
    /// server closed the connection (nil if it had not after `limit` seconds).
    static func trickle(port: Int, head: String, body: String, limit: Double) -> Double? {
        let descriptor = connect(port: port)
        defer { close(descriptor) }
        let started = Date()
        guard send(descriptor, head) else { return nil }
        for character in body {
            if closedByServer(descriptor) || !send(descriptor, String(character)) {
                return Date().timeIntervalSince(started)
            }
            if Date().timeIntervalSince(started) > limit { return nil }
            Thread.sleep(forTimeInterval: 0.05)
        }
        return nil
    }

    @Test func aTrickledBodyIsCutOffAndNothingIsWritten() throws {
        // A second's grace, then 1 MB/s on average.
        let server = try TestServer { listener in
            listener.bodyGraceSeconds = 1
            listener.minimumBodyRate = 1_000_000
        }
        defer { server.stop() }
        #expect(try httpRequest(port: server.port, "PUT", "/db").status == 201)
        let document = "{\"a\":\"" + String(repeating: "x", count: 200) + "\"}"
        let json = Self.trickle(port: server.port, head: "PUT /db/slow HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                                    + "Content-Length: \(document.utf8.count)\r\n\r\n", body: document, limit: 6)
        #expect(json != nil && json! >= 1 && json! < 3, "closed after \(String(describing: json)) s")
        let attachment = String(repeating: "y", count: 200)
        let upload = Self.trickle(port: server.port, head: "PUT /db/slow2/file.txt HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\n"
                                      + "Content-Length: \(attachment.utf8.count)\r\n\r\n", body: attachment, limit: 6)
        #expect(upload != nil && upload! >= 1 && upload! < 3, "closed after \(String(describing: upload)) s")
        let chunked = Self.trickle(port: server.port, head: "PUT /db/slow3 HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                                       + "Transfer-Encoding: chunked\r\n\r\n", body: "C8\r\n" + document, limit: 6)
        #expect(chunked != nil && chunked! >= 1 && chunked! < 3, "closed after \(String(describing: chunked)) s")
        for id in ["slow", "slow2", "slow3"] {
            #expect(try httpRequest(port: server.port, "GET", "/db/\(id)").status == 404)
        }
        #expect(try httpRequest(port: server.port, "GET", "/db").body.count > 0)
        let info = try JSONValue.parse(try httpRequest(port: server.port, "GET", "/db").body)
        #expect(info["doc_count"] == 0)
        #expect(try httpRequest(port: server.port, "GET", "/_up").status == 200)
    }

    @Test func anUploadAtNormalSpeedOutlastsTheGracePeriod() throws {
        let server = try TestServer { listener in
            listener.bodyGraceSeconds = 1
            listener.minimumBodyRate = 1_000_000
        }
        defer { server.stop() }
        #expect(try httpRequest(port: server.port, "PUT", "/db").status == 201)
        // 8 MiB in 16 pieces over about 1.6 s: past the grace period, well above the rate.
        let piece = [UInt8](repeating: UInt8(ascii: "z"), count: 512 * 1024)
        let descriptor = Self.connect(port: server.port, timeout: 10)
        defer { close(descriptor) }
        #expect(Self.send(descriptor, "PUT /db/big/file.bin HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\n"
                          + "Content-Length: \(piece.count * 16)\r\n\r\n"))
        let started = Date()
        for _ in 0..<16 {
            var sent = 0
            while sent < piece.count {
                let count = piece[sent...].withUnsafeBytes { Foundation.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                guard count > 0 else { break }
                sent += count
            }
            Thread.sleep(forTimeInterval: 0.1)
        }
        #expect(Date().timeIntervalSince(started) > 1.2)
        var answer: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while !String(decoding: answer, as: UTF8.self).contains("}") {
            let count = recv(descriptor, &buffer, buffer.count, 0)
            if count <= 0 { break }
            answer += buffer[..<count]
        }
        #expect(String(decoding: answer, as: UTF8.self).hasPrefix("HTTP/1.1 201 "), "\(String(decoding: answer, as: UTF8.self))")
        let stored = try httpRequest(port: server.port, "GET", "/db/big/file.bin")
        #expect(stored.status == 200)
        #expect(stored.body.count == piece.count * 16)
    }
}
