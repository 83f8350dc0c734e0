import CouchCore
import CouchServer
import CouchTestSupport
import Foundation
import Testing

/// Connections that misbehave before a request is even read: oversized or ambiguous heads,
/// trickled headers, more clients than the server holds, a stop with feeds waiting.
@Suite struct HostileConnectionTests {
    /// Sends `bytes` on a fresh connection and returns everything the server sends back
    /// until it closes (or `timeout` passes).
    static func exchange(port: Int, _ bytes: [UInt8], timeout: Double = 5) -> [UInt8] {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(descriptor) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { return [] }
        var time = timeval(tv_sec: Int(timeout), tv_usec: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &time, socklen_t(MemoryLayout<timeval>.size))
        _ = bytes.withUnsafeBytes { send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = recv(descriptor, &buffer, buffer.count, 0)
            if count <= 0 { break }
            received += buffer[..<count]
        }
        return received
    }

    static func statusLines(_ bytes: [UInt8]) -> Int {
        String(decoding: bytes, as: UTF8.self).components(separatedBy: "HTTP/1.1 ").count - 1
    }

    @Test func everyAnswerIsCouchDBsJSONWithOneStatusLine() throws {
        let server = try HostileRequestTests.Target()
        #expect(try server.request("PUT", "/db").status == 201)
        let cases: [(String, Int, String)] = [
            ("GET /db/\(String(repeating: "u", count: 70_000)) HTTP/1.1\r\nHost: x\r\n\r\n", 414, "uri_too_long"),
            ("GET /db HTTP/1.1\r\nHost: x\r\nX-Padding: \(String(repeating: "h", count: 300_000))\r\n\r\n", 431, "header_too_large"),
            ("PUT /db/a HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: abc\r\n\r\n{}", 400, "bad_request"),
            ("PUT /db/a HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: -5\r\n\r\n{}", 400, "bad_request"),
            ("PUT /db/a HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 99999999999999999999999\r\n\r\n{}", 413, "too_large"),
            ("PUT /db/a HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}", 400, "bad_request"),
            ("GARBAGE\r\n\r\n", 400, "bad_request"),
        ]
        for (request, status, error) in cases {
            let answer = Self.exchange(port: server.process.port, Array(request.utf8))
            let text = String(decoding: answer, as: UTF8.self)
            #expect(text.hasPrefix("HTTP/1.1 \(status) "), "\(text.prefix(200))")
            #expect(Self.statusLines(answer) == 1, "\(text.prefix(400))")
            let body = text.components(separatedBy: "\r\n\r\n").dropFirst().joined(separator: "\r\n\r\n")
            #expect((try? JSONValue.parse(body))?["error"] == JSONValue(error), "\(body)")
            server.expectUp()
        }
        // A 15 KB cookie is within the header limit and served normally.
        let cookie = Self.exchange(port: server.process.port, Array(
            "GET /db HTTP/1.1\r\nHost: x\r\nConnection: close\r\nCookie: c=\(String(repeating: "c", count: 15_000))\r\n\r\n".utf8))
        #expect(String(decoding: cookie, as: UTF8.self).hasPrefix("HTTP/1.1 200 "))
        #expect(Self.statusLines(cookie) == 1)
        #expect(try server.json("GET", "/db").json["doc_count"] == 0)
    }

    /// Body framing libmicrohttpd cannot read, and heads with bare LFs: CouchDB's JSON with one
    /// status line, on a connection's first request (which the `Acceptor` vets) and on a later
    /// one (which libmicrohttpd reads), and nothing written.
    @Test func framingErrorsAreAnsweredWithCouchDBsJSON() throws {
        let server = try HostileRequestTests.Target()
        #expect(try server.request("PUT", "/db").status == 201)
        let put = "PUT /db/doc HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        let cases: [(String, Int, String)] = [
            (put + "Transfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n", 400, "bad_request"),
            (put + "Transfer-Encoding: chunked\r\n\r\n2\r\n{}XX0\r\n\r\n", 400, "bad_request"),
            (put + "Transfer-Encoding: chunked\r\n\r\nffffffffffffffffffff\r\n{}\r\n0\r\n\r\n", 413, "too_large"),
            (put + "Transfer-Encoding: identity\r\n\r\n{\"a\":1}", 501, "unknown_transfer_encoding"),
            (put + "Transfer-Encoding: gzip, chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n", 501, "unknown_transfer_encoding"),
            (put + "Content-Length: 7, 7\r\n\r\n{\"a\":1}", 400, "bad_request"),
            (put + "Content-Length: +7\r\n\r\n{\"a\":1}", 400, "bad_request"),
        ]
        let first = "GET /_up HTTP/1.1\r\nHost: x\r\n\r\n"
        for (request, status, error) in cases {
            for kept in [false, true] {
                let answer = String(decoding: Self.exchange(port: server.process.port, Array(((kept ? first : "") + request).utf8)),
                                    as: UTF8.self)
                var responses = answer.components(separatedBy: "HTTP/1.1 ").dropFirst().map { "HTTP/1.1 " + $0 }
                if kept {
                    #expect(responses.first?.hasPrefix("HTTP/1.1 200 ") == true, "\(answer.prefix(300))")
                    responses = Array(responses.dropFirst())
                }
                // libmicrohttpd reads a later request's Content-Length itself, and would answer one it cannot
                // read with its head twice: that connection is closed instead.
                if kept, request.contains("Content-Length: ") {
                    #expect(responses.isEmpty, "\(request.prefix(90)): \(answer)")
                    continue
                }
                #expect(responses.count == 1, "\(request.prefix(90)): \(answer)")
                let text = responses.first ?? ""
                #expect(text.hasPrefix("HTTP/1.1 \(status) "), "\(request.prefix(90)): \(text.prefix(200))")
                #expect(text.contains("Content-Type: application/json"), "\(text)")
                let body = text.components(separatedBy: "\r\n\r\n").dropFirst().joined(separator: "\r\n\r\n")
                #expect((try? JSONValue.parse(body))?["error"] == JSONValue(error), "\(request.prefix(90)): \(body)")
            }
        }
        #expect(try server.request("GET", "/db/doc").status == 404)
        // Lines ending with a bare LF are read as CouchDB reads them.
        for request in ["GET /db HTTP/1.1\nHost: x\nConnection: close\n\n", "GET /db HTTP/1.1\nConnection: close\n\r\n",
                        first + "GET /db HTTP/1.1\nConnection: close\n\n"] {
            let answer = String(decoding: Self.exchange(port: server.process.port, Array(request.utf8)), as: UTF8.self)
            #expect(answer.hasPrefix("HTTP/1.1 200 "), "\(answer.prefix(200))")
            #expect(answer.contains(#""db_name":"db""#), "\(answer.prefix(400))")
        }
        server.expectUp()
    }

    @Test func trickledHeadersNeitherLastNorLockOthersOut() throws {
        let server = try TestServer { listener in
            listener.connectionLimit = 200
            listener.headerTimeoutSeconds = 3
        }
        defer { server.stop() }
        // More slow clients than the server holds connections, each renewing its bytes.
        var slow: [HTTPTestConnection] = []
        for _ in 0..<300 {
            guard let connection = try? HTTPTestConnection(port: server.port, timeout: 2) else { break }
            try? connection.writeRaw(Array("GET /_up HTTP/1.1\r\nX-Slow: ".utf8))
            slow.append(connection)
        }
        defer { slow.forEach { $0.close() } }
        // Only to connections the server still holds: writing to a closed one would reconnect it.
        let trickle = { for connection in Self.held(slow) { try? connection.writeRaw([UInt8(ascii: "a")]) } }
        // Others are served while trickling connections still hold the server's pending slots
        // (the oldest are evicted as others come): an answer counts only if some of them have
        // neither been answered nor closed yet, i.e. before their header deadline.
        let giveUp = Date().addingTimeInterval(60)
        var answeredWhileHeld = 0
        while answeredWhileHeld < 10, Date() < giveUp {
            trickle()
            guard let up = try? httpRequest(port: server.port, "GET", "/_up"), up.status == 200 else { continue }
            guard !Self.held(slow).isEmpty else { break }
            answeredWhileHeld += 1
        }
        #expect(answeredWhileHeld == 10)
        // Past the header deadline, every trickling connection is closed despite its progress.
        while !Self.held(slow).isEmpty, Date() < giveUp {
            trickle()
            Thread.sleep(forTimeInterval: 0.3)
        }
        var closed = 0
        for connection in slow {
            // Had the connection lasted, this would end its head and /_up would answer 200. (The
            // test client reconnects a closed connection: "a" then arrives as a malformed request.)
            try? connection.writeRaw(Array("a\r\n\r\n".utf8))
            if (try? connection.readResponse())?.status != 200 { closed += 1 }
        }
        #expect(closed == slow.count)
    }

    /// The connections the server has neither answered nor closed yet.
    private static func held(_ connections: [HTTPTestConnection]) -> [HTTPTestConnection] {
        var descriptors = connections.map { pollfd(fd: $0.fileDescriptor, events: Int16(POLLIN), revents: 0) }
        guard poll(&descriptors, nfds_t(descriptors.count), 0) >= 0 else { return connections }
        return zip(connections, descriptors).filter { $0.0.fileDescriptor >= 0 && $0.1.revents == 0 }.map(\.0)
    }

    @Test func aFullServerAnswers503AndRecovers() throws {
        let server = try TestServer { $0.connectionLimit = 4 }
        defer { server.stop() }
        let held = try (0..<4).map { _ in try HTTPTestConnection(port: server.port, timeout: 5) }
        for connection in held { #expect(try connection.request("GET", "/_up").status == 200) }
        let answer = Self.exchange(port: server.port, Array("GET /_up HTTP/1.1\r\nHost: x\r\n\r\n".utf8))
        let text = String(decoding: answer, as: UTF8.self)
        #expect(text.hasPrefix("HTTP/1.1 503 "), "\(text)")
        #expect(text.hasSuffix(#"{"error":"service_unavailable","reason":"Too many connections; try again later"}"# + "\n"))
        held[0].close()
        held[1].close()
        Thread.sleep(forTimeInterval: 0.3)
        #expect(try httpRequest(port: server.port, "GET", "/_up").status == 200)
        held.dropFirst(2).forEach { $0.close() }
    }

    @Test func oneAddressCannotTakeEveryConnection() throws {
        let server = try TestServer { $0.maximumConnectionsPerAddress = 3 }
        defer { server.stop() }
        let held = try (0..<3).map { _ in try HTTPTestConnection(port: server.port, timeout: 5) }
        for connection in held { #expect(try connection.request("GET", "/_up").status == 200) }
        let answer = String(decoding: Self.exchange(port: server.port, Array("GET /_up HTTP/1.1\r\nHost: x\r\n\r\n".utf8)),
                            as: UTF8.self)
        #expect(answer.hasPrefix("HTTP/1.1 503 "), "\(answer)")
        #expect(answer.contains("Too many connections from this address"))
        held[0].close()
        Thread.sleep(forTimeInterval: 0.3)
        #expect(try httpRequest(port: server.port, "GET", "/_up").status == 200)
        held.dropFirst().forEach { $0.close() }
    }

    @Test func sigtermStopsTheServerWithFeedsWaiting() throws {
        let server = try ServerProcess()
        defer { server.stop() }
        #expect(try httpRequest(port: server.port, "PUT", "/db").status == 201)
        var feeds: [HTTPTestConnection] = []
        for _ in 0..<50 {
            let feed = try HTTPTestConnection(port: server.port, timeout: 5)
            _ = try feed.startStreaming("GET", "/db/_changes?feed=continuous&since=now&heartbeat=60000")
            feeds.append(feed)
        }
        defer { feeds.forEach { $0.close() } }
        Thread.sleep(forTimeInterval: 0.2)
        server.process.terminate()
        let deadline = Date().addingTimeInterval(5)
        while server.process.isRunning, Date() < deadline { Thread.sleep(forTimeInterval: 0.05) }
        #expect(!server.process.isRunning)
        if !server.process.isRunning {
            #expect(server.process.terminationReason == .exit)
            #expect(server.process.terminationStatus == 0)
        }
    }
}

/// Few descriptors: the server sheds load with CouchDB's 503 instead of going silent, recovers
/// when clients leave, and stops cleanly with feeds waiting.
@Suite struct DescriptorExhaustionTests {
    @Test func feedsBeyondTheDescriptorLimitAreShedAndTheServerRecovers() throws {
        // A hard limit of 320 open files: the server keeps 256 for itself, 64 for connections.
        let server = try ServerProcess(openFileLimit: 320)
        defer { server.stop() }
        let (process, port) = (server.process, server.port)
        #expect(try httpRequest(port: port, "PUT", "/db").status == 201)

        var feeds: [HTTPTestConnection] = []
        var shed = 0
        for _ in 0..<120 {
            guard let feed = try? HTTPTestConnection(port: port, timeout: 5) else { shed += 1; continue }
            if let head = try? feed.startStreaming("GET", "/db/_changes?feed=continuous&since=now&heartbeat=60000") {
                if head.status == 200 { feeds.append(feed) } else { #expect(head.status == 503); shed += 1; feed.close() }
            } else {
                shed += 1
                feed.close()
            }
        }
        #expect(feeds.count >= 40 && feeds.count <= 64, "\(feeds.count) feeds held")
        #expect(shed > 0)
        let refused = try httpRequest(port: port, "GET", "/_up")
        #expect(refused.status == 503)
        #expect(try JSONValue.parse(refused.body)["error"] == "service_unavailable")
        // Clients leave: the server answers again, and a write reaches the remaining feeds.
        feeds.prefix(20).forEach { $0.close() }
        Thread.sleep(forTimeInterval: 0.3)
        #expect(try httpRequest(port: port, "GET", "/_up").status == 200)
        #expect(try httpRequest(port: port, "PUT", "/db/doc", body: Array("{}".utf8)).status == 201)
        let line = try feeds.last?.readLine(timeout: 5)
        #expect(line?.contains("\"doc\"") == true)
        // SIGTERM with feeds suspended: a clean, prompt exit.
        process.terminate()
        let deadline = Date().addingTimeInterval(5)
        while process.isRunning, Date() < deadline { Thread.sleep(forTimeInterval: 0.05) }
        #expect(!process.isRunning)
        if !process.isRunning { #expect(process.terminationStatus == 0) }
        feeds.forEach { $0.close() }
        #expect(server.stop().contains("320 open files"))
    }
}
