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
        // A second's grace, then 256 kB/s on average.
        let server = try TestServer { listener in
            listener.bodyGraceSeconds = 1
            listener.minimumBodyRate = 256_000
        }
        defer { server.stop() }
        #expect(try httpRequest(port: server.port, "PUT", "/db").status == 201)
        let document = "{\"a\":\"" + String(repeating: "x", count: 200) + "\"}"
        let json = Self.trickle(port: server.port, head: "PUT /db/slow HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                                    + "Content-Length: \(document.utf8.count)\r\n\r\n", body: document, limit: 6)
        #expect(json != nil && json! >= 1 && json! < 5, "closed after \(String(describing: json)) s")
        let attachment = String(repeating: "y", count: 200)
        let upload = Self.trickle(port: server.port, head: "PUT /db/slow2/file.txt HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\n"
                                      + "Content-Length: \(attachment.utf8.count)\r\n\r\n", body: attachment, limit: 6)
        #expect(upload != nil && upload! >= 1 && upload! < 5, "closed after \(String(describing: upload)) s")
        let chunked = Self.trickle(port: server.port, head: "PUT /db/slow3 HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                                       + "Transfer-Encoding: chunked\r\n\r\n", body: "C8\r\n" + document, limit: 6)
        #expect(chunked != nil && chunked! >= 1 && chunked! < 5, "closed after \(String(describing: chunked)) s")
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
            listener.minimumBodyRate = 256_000
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

    /// Reads one response to a request whose answer has a `Content-Length` (nil on timeout).
    static func readResponse(_ descriptor: Int32) -> String? {
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let text = String(decoding: received, as: UTF8.self)
            if let end = text.range(of: "\r\n\r\n"),
               let line = text[..<end.lowerBound].split(separator: "\r\n").first(where: { $0.lowercased().hasPrefix("content-length:") }),
               let length = Int(line.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)),
               text.utf8.count - text[..<end.upperBound].utf8.count >= length {
                return text
            }
            let count = recv(descriptor, &buffer, buffer.count, 0)
            if count <= 0 { return nil }
            received += buffer[..<count]
        }
    }

    /// Everything the server sends until it closes the connection, and whether it did.
    static func readToClose(_ descriptor: Int32) -> (text: String, closed: Bool) {
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = recv(descriptor, &buffer, buffer.count, 0)
            if count <= 0 { return (String(decoding: received, as: UTF8.self), count == 0) }
            received += buffer[..<count]
        }
    }

    @Test func laterRequestsOnAKeptAliveConnectionGetTheFirstOnesChecks() throws {
        let server = try TestServer()
        defer { server.stop() }
        #expect(try httpRequest(port: server.port, "PUT", "/db").status == 201)
        let json = "Content-Type: application/json\r\n"
        // Over the limits (16 KiB each) by less than libmicrohttpd's own buffer, so that the
        // request reaches the handler; the first request's head was vetted by the Acceptor.
        let cases: [(String, Int, String)] = [
            ("GET /db/\(String(repeating: "u", count: 20_000)) HTTP/1.1\r\nHost: x\r\n\r\n", 414, "uri_too_long"),
            ("PUT /db/\(String(repeating: "u", count: 20_000)) HTTP/1.1\r\nHost: x\r\n\(json)Content-Length: 2\r\n\r\n{}",
             414, "uri_too_long"),
            ("GET /db HTTP/1.1\r\nHost: x\r\nX-Padding: \(String(repeating: "h", count: 20_000))\r\n\r\n", 431, "header_too_large"),
            ("PUT /db/a HTTP/1.1\r\nHost: x\r\n\(json)X-Padding: \(String(repeating: "h", count: 20_000))\r\nContent-Length: 2\r\n\r\n{}",
             431, "header_too_large"),
            ("PUT /db/a HTTP/1.1\r\nHost: x\r\n\(json)Content-Length: 2\r\nContent-Length: 3\r\n\r\n{}", 400, "bad_request"),
            ("PUT /db/a HTTP/1.1\r\nHost: x\r\n\(json)Content-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
             400, "bad_request"),
            ("PUT /db/a HTTP/1.1\r\nHost: x\r\n\(json)Content-Length: 999999999999\r\n\r\n{}", 413, "too_large"),
        ]
        for (request, status, error) in cases {
            let descriptor = Self.connect(port: server.port)
            defer { close(descriptor) }
            #expect(Self.send(descriptor, "GET /_up HTTP/1.1\r\nHost: x\r\n\r\n"))
            let first = Self.readResponse(descriptor)
            #expect(first?.hasPrefix("HTTP/1.1 200 ") == true)
            #expect(Self.send(descriptor, request))
            let (answer, closed) = Self.readToClose(descriptor)
            #expect(answer.hasPrefix("HTTP/1.1 \(status) "), "\(answer.prefix(300))")
            #expect(answer.components(separatedBy: "HTTP/1.1 ").count == 2, "\(answer.prefix(600))")
            #expect(closed, "the connection stays open after \(status)")
            let body = answer.components(separatedBy: "\r\n\r\n").dropFirst().joined(separator: "\r\n\r\n")
            #expect((try? JSONValue.parse(body))?["error"] == JSONValue(error), "\(body)")
            #expect(try httpRequest(port: server.port, "GET", "/_up").status == 200)
        }
        let info = try JSONValue.parse(try httpRequest(port: server.port, "GET", "/db").body)
        #expect(info["doc_count"] == 0)
    }
}
