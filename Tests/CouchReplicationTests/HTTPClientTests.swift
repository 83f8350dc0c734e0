import CouchCore
import CurlClient
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// The libcurl client on its own, against small loopback servers.
@Suite struct HTTPClientTests {
    @Test func sendsMethodHeadersAndBodyAndReadsTheResponse() async throws {
        let server = try LoopbackHTTPServer { request in
            .respond(.json(201, ["method": JSONValue(request.method), "target": JSONValue(request.target),
                                 "x": JSONValue(request.header("X-Test") ?? ""),
                                 "body": JSONValue(String(decoding: request.body, as: UTF8.self))],
                           headers: [("Set-Cookie", "a=1"), ("Set-Cookie", "b=2")]))
        }
        defer { server.stop() }
        let client = HTTPClient()
        defer { client.shutdown() }
        for method in ["GET", "POST", "PUT", "DELETE"] {
            let body: [UInt8]? = method == "POST" || method == "PUT" ? Array("{\"k\":1}".utf8) : nil
            let response = try await client.send(HTTPClient.Request(
                method: method, url: server.url + "/db/x?q=1", headers: [("X-Test", "yes")], body: body))
            #expect(response.status == 201)
            let json = try JSONValue.parse(response.body)
            #expect(json["method"] == JSONValue(method))
            #expect(json["target"] == "/db/x?q=1")
            #expect(json["x"] == "yes")
            #expect(json["body"] == JSONValue(body.map { String(decoding: $0, as: UTF8.self) } ?? ""))
            #expect(response.headerValues("set-cookie") == ["a=1", "b=2"])
            #expect(response.header("content-type") == "application/json")
        }
    }

    @Test func keepsConnectionsAlive() async throws {
        let server = try LoopbackHTTPServer { _ in .respond(.json(200, ["ok": true])) }
        defer { server.stop() }
        let client = HTTPClient()
        defer { client.shutdown() }
        for _ in 0..<20 {
            _ = try await client.send(HTTPClient.Request(url: server.url + "/"))
        }
        #expect(server.requests.count == 20)
        // One connection serves them all; under a heavy load libcurl may start the next transfer
        // before the last one's connection is back in its pool, and open a second (never 20).
        #expect(server.connectionsAccepted <= 2)
    }

    @Test func runsRequestsConcurrently() async throws {
        let gauge = Gauge()
        let server = try LoopbackHTTPServer { _ in
            gauge.enter()
            Thread.sleep(forTimeInterval: 0.2)
            gauge.leave()
            return .respond(.json(200, ["ok": true]))
        }
        defer { server.stop() }
        let client = HTTPClient()
        defer { client.shutdown() }
        try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<8 { group.addTask { try await client.send(HTTPClient.Request(url: server.url + "/")).status } }
            for try await status in group { #expect(status == 200) }
        }
        #expect(gauge.maximum >= 4, "requests to one peer run at once, each on its own connection")
    }

    /// Counts requests in progress at once.
    final class Gauge: @unchecked Sendable {
        private let lock = NSLock()
        private var current = 0
        private var peak = 0
        var maximum: Int { lock.withLock { peak } }
        func enter() { lock.withLock { current += 1; peak = max(peak, current) } }
        func leave() { lock.withLock { current -= 1 } }
    }

    @Test func anUnreachablePeerIsReportedAsSuch() async throws {
        // A port held by a socket that does not listen: connections to it are refused, and no
        // other test can take it meanwhile.
        let holder = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(holder) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                bind(holder, pointer, length) == 0 ? getsockname(holder, pointer, &length) : -1
            }
        }
        let port = Int(UInt16(bigEndian: address.sin_port))
        let client = HTTPClient()
        defer { client.shutdown() }
        do {
            _ = try await client.send(HTTPClient.Request(url: "http://127.0.0.1:\(port)/"))
            Issue.record("expected an error")
        } catch {
            guard case .cannotConnect = error else { Issue.record("expected cannotConnect, got \(error)"); return }
        }
    }

    @Test func aDroppedConnectionIsAnError() async throws {
        let server = try LoopbackHTTPServer { _ in .drop }
        defer { server.stop() }
        let client = HTTPClient()
        defer { client.shutdown() }
        do {
            _ = try await client.send(HTTPClient.Request(url: server.url + "/"))
            Issue.record("expected an error")
        } catch {
            guard case .connectionLost = error else { Issue.record("expected connectionLost, got \(error)"); return }
        }
    }

    @Test func streamsLinesAsTheyArriveAndPausesASlowReader() async throws {
        let lines = (0..<20_000).map { "{\"seq\":\($0),\"padding\":\"\(String(repeating: "x", count: 100))\"}" }
        let server = try LoopbackHTTPServer { _ in
            .respond(LoopbackHTTPServer.Response(status: 200, body: Array((lines.joined(separator: "\n") + "\n\n").utf8)))
        }
        defer { server.stop() }
        var configuration = HTTPClientConfiguration()
        configuration.streamBufferLimit = 64 * 1024
        let client = HTTPClient(configuration: configuration)
        defer { client.shutdown() }
        let response = try await client.stream(HTTPClient.Request(url: server.url + "/feed"))
        #expect(response.status == 200)
        var received: [String] = []
        while let line = try await response.nextLine() {
            received.append(String(decoding: line, as: UTF8.self))
            if received.count % 5000 == 0 { try await Task.sleep(nanoseconds: 10_000_000) }
        }
        #expect(received.count == lines.count + 1)
        #expect(Array(received.prefix(lines.count)) == lines)
        #expect(received.last == "", "a heartbeat is an empty line")
    }

    @Test func cancellingAWaitingReaderEndsTheTransfer() async throws {
        // A server that answers the head and then never finishes the body.
        let server = try LoopbackHTTPServer { _ in
            .respondAndHold(LoopbackHTTPServer.Response(status: 200, body: Array("{\"first\":1}\n".utf8)))
        }
        defer { server.stop() }
        let client = HTTPClient()
        defer { client.shutdown() }
        let response = try await client.stream(HTTPClient.Request(url: server.url + "/"))
        let reader = Task { () -> Int in
            var count = 0
            do {
                while try await response.nextLine() != nil { count += 1 }
            } catch {}
            return count
        }
        try await Task.sleep(nanoseconds: 100_000_000)
        reader.cancel()
        #expect(await reader.value == 1)
    }

    @Test func uploadsABodyReadFromMemoryAndFilesAsOftenAsItIsSent() async throws {
        let server = try LoopbackHTTPServer { request in
            .respond(LoopbackHTTPServer.Response(status: 201, body: request.body))
        }
        defer { server.stop() }
        let path = NSTemporaryDirectory() + "upload-" + Digest.randomHex(bytes: 6)
        let file = (0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        #expect(FileManager.default.createFile(atPath: path, contents: Data(file)))
        defer { unlink(path) }
        var body = UploadBody()
        body.append("head:")
        body.appendFile(path: path, length: file.count)
        body.append(":middle:")
        body.appendFile(path: path, offset: 100, length: 50)
        body.append(":end")
        #expect(body.length == 5 + file.count + 8 + 50 + 4)
        let client = HTTPClient()
        defer { client.shutdown() }
        let expected = Array("head:".utf8) + file + Array(":middle:".utf8) + Array(file[100..<150]) + Array(":end".utf8)
        for method in ["PUT", "POST"] {
            let response = try await client.send(HTTPClient.Request(method: method, url: server.url + "/up", upload: body))
            #expect(response.status == 201)
            #expect(response.body == expected, "\(method)")
        }
        #expect(server.requests.allSatisfy { $0.header("content-length") == String(expected.count) })
    }

    @Test func anUploadWhoseFileIsShortFailsRatherThanSendingLess() async throws {
        let server = try LoopbackHTTPServer { request in .respond(LoopbackHTTPServer.Response(status: 201, body: request.body)) }
        defer { server.stop() }
        var body = UploadBody()
        body.appendFile(path: "/nonexistent/" + Digest.randomHex(bytes: 6), length: 10)
        let client = HTTPClient()
        defer { client.shutdown() }
        await #expect(throws: HTTPClientError.self) {
            _ = try await client.send(HTTPClient.Request(method: "PUT", url: server.url + "/up", upload: body))
        }
    }

    @Test func streamsALargeBodyInChunksWithinTheBufferLimit() async throws {
        let payload = (0..<3_000_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        let server = try LoopbackHTTPServer { _ in .respond(LoopbackHTTPServer.Response(status: 200, body: payload)) }
        defer { server.stop() }
        var configuration = HTTPClientConfiguration()
        configuration.streamBufferLimit = 128 * 1024
        let client = HTTPClient(configuration: configuration)
        defer { client.shutdown() }
        let response = try await client.stream(HTTPClient.Request(url: server.url + "/blob"), framing: .chunks)
        #expect(response.status == 200)
        var received: [UInt8] = []
        var largest = 0
        while let chunk = try await response.nextChunk() {
            largest = max(largest, chunk.count)
            received.append(contentsOf: chunk)
            if received.count < 1_000_000 { try await Task.sleep(nanoseconds: 2_000_000) }
        }
        #expect(received == payload)
        #expect(largest <= 256 * 1024 + 64 * 1024, "chunks are joined only up to a bound")
    }
}
