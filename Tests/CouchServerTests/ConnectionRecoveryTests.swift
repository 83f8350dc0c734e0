import CouchCore
import CouchTestSupport
import Foundation
import Testing

/// Clients that send a request and leave at once, many together and at the connection limit:
/// every descriptor comes back, and the server answers new clients within seconds of the load
/// ending. (libmicrohttpd 0.9.75 deadlocked a worker that was handed a connection beyond its
/// share; its connections then stayed in CLOSE-WAIT and every later client got 503.)
@Suite struct ConnectionRecoveryTests {
    /// Requests of every kind a worker answers: plain reads, feeds that wait (suspended
    /// connections), work answered off the listener (`_find`, a view), and a head never ended.
    static let requests: [String] = [
        "GET /db HTTP/1.1\r\nHost: x\r\n\r\n",
        "GET /db/_changes?feed=longpoll&since=now HTTP/1.1\r\nHost: x\r\n\r\n",
        "GET /db/_changes?feed=continuous&since=now HTTP/1.1\r\nHost: x\r\n\r\n",
        "POST /db/_find HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 29\r\n\r\n"
            + #"{"selector":{"n":{"$gt":0}}}"# + "\n",
        "GET /db/_design/d/_view/v HTTP/1.1\r\nHost: x\r\n\r\n",
        "GET /db/_all_docs?include_docs=true HTTP/1.1\r\nHost: x\r\n\r\n",
        "GET /db HTTP/1.1\r\nHost: x\r\n",
    ]

    /// The server process's open sockets (its other descriptors vary with load: pooled
    /// SQLite readers are opened as requests run at once, and kept).
    static func sockets(_ pid: Int32) -> Int {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd") else { return -1 }
        return names.filter { (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/fd/\($0)"))?
            .hasPrefix("socket:") == true }.count
    }

    static func prepare(port: Int) throws {
        #expect(try httpRequest(port: port, "PUT", "/db").status == 201)
        let design = #"{"views":{"v":{"map":"function(doc){emit(doc.n,1)}"}}}"#
        #expect(try httpRequest(port: port, "PUT", "/db/_design/d", body: Array(design.utf8)).status == 201)
        for index in 1...20 {
            #expect(try httpRequest(port: port, "PUT", "/db/d\(index)", body: Array(#"{"n":\#(index)}"#.utf8)).status == 201)
        }
        // Every kind answered once, so the files they open (index, reader connections) are open.
        for request in requests where request.hasSuffix("\r\n\r\n") && !request.contains("feed=") {
            let answer = HostileConnectionTests.exchange(port: port, Array(request.replacingOccurrences(
                of: "Host: x\r\n", with: "Host: x\r\nConnection: close\r\n").utf8))
            #expect(String(decoding: answer, as: UTF8.self).hasPrefix("HTTP/1.1 200 "))
        }
    }

    /// Opens `count` connections, sends each a request, then closes them all without reading.
    static func burst(port: Int, count: Int) {
        var connections: [HTTPTestConnection] = []
        for index in 0..<count {
            guard let connection = try? HTTPTestConnection(port: port, timeout: 5) else { continue }
            try? connection.writeRaw(Array(requests[index % requests.count].utf8))
            connections.append(connection)
        }
        connections.forEach { $0.close() }
    }

    /// Waits until `/_up` answers 200 and the sockets are back to `baseline` (and the one the
    /// `/_up` request may leave in closing).
    static func expectRecovery(port: Int, pid: Int32, baseline: Int, within seconds: Double) {
        let slack = 1
        let deadline = Date().addingTimeInterval(seconds)
        var status = 0
        var open = 0
        repeat {
            Thread.sleep(forTimeInterval: 0.2)
            status = (try? httpRequest(port: port, "GET", "/_up"))?.status ?? 0
            open = sockets(pid)
        } while (status != 200 || open > baseline + slack) && Date() < deadline
        #expect(status == 200, "/_up answered \(status) \(seconds) s after the load")
        #expect(open <= baseline + slack, "\(open) sockets open, \(baseline) before the load")
    }

    @Test func clientsThatLeaveAtTheConnectionLimitGiveEveryDescriptorBack() throws {
        let server = try ServerProcess(arguments: ["--max-connections", "128", "--threads", "4", "--log-level", "critical"])
        defer { server.stop() }
        let pid = server.process.processIdentifier
        try Self.prepare(port: server.port)
        let baseline = Self.sockets(pid)
        for _ in 0..<6 { Self.burst(port: server.port, count: 300) }
        Self.expectRecovery(port: server.port, pid: pid, baseline: baseline, within: 5)
        // And the server still does its work: a feed started now sees a write.
        let feed = try HTTPTestConnection(port: server.port, timeout: 10)
        defer { feed.close() }
        #expect(try feed.startStreaming("GET", "/db/_changes?feed=continuous&since=now&heartbeat=1000").status == 200)
        #expect(try httpRequest(port: server.port, "PUT", "/db/after", body: Array("{}".utf8)).status == 201)
        var line: String?
        repeat { line = try feed.readLine(timeout: 5) } while line?.isEmpty == true
        #expect(line?.contains("\"after\"") == true, "\(line ?? "no line")")
    }

    /// A request answered off the listener (a view whose index takes seconds to build) whose
    /// client leaves: its connection is closed at once, not when the work ends.
    @Test func aClientLeavingSlowWorkFreesItsConnectionAtOnce() throws {
        let server = try ServerProcess(arguments: ["--log-level", "critical"])
        defer { server.stop() }
        let pid = server.process.processIdentifier
        #expect(try httpRequest(port: server.port, "PUT", "/db").status == 201)
        let slow = #"{"views":{"v":{"map":"function(doc){var t=Date.now();while(Date.now()-t<4000){}emit(1,1)}"}}}"#
        #expect(try httpRequest(port: server.port, "PUT", "/db/_design/slow", body: Array(slow.utf8)).status == 201)
        #expect(try httpRequest(port: server.port, "PUT", "/db/a", body: Array("{}".utf8)).status == 201)
        Thread.sleep(forTimeInterval: 0.2)   // the last request's connection closed
        let baseline = Self.sockets(pid)
        let started = Date()
        var clients: [HTTPTestConnection] = []
        for _ in 0..<4 {
            let client = try HTTPTestConnection(port: server.port, timeout: 5)
            try client.writeRaw(Array("GET /db/_design/slow/_view/v HTTP/1.1\r\nHost: x\r\n\r\n".utf8))
            clients.append(client)
        }
        Thread.sleep(forTimeInterval: 0.3)
        #expect(Self.sockets(pid) >= baseline + 4, "the requests are being answered")
        clients.forEach { $0.close() }
        var open = Self.sockets(pid)
        while open > baseline, Date().timeIntervalSince(started) < 10 {
            Thread.sleep(forTimeInterval: 0.05)
            open = Self.sockets(pid)
        }
        // The map function takes 4 s: the sockets were freed before it ended.
        #expect(open <= baseline)
        #expect(Date().timeIntervalSince(started) < 3, "sockets freed after \(Date().timeIntervalSince(started)) s")
        #expect(try httpRequest(port: server.port, "GET", "/_up").status == 200)
    }

    /// A client that leaves before ending its request's head: its connection is closed at
    /// once, not at the head's deadline (30 s).
    @Test func aHeadLeftUnfinishedIsClosedWithItsClient() throws {
        let server = try ServerProcess(arguments: ["--log-level", "critical"])
        defer { server.stop() }
        let pid = server.process.processIdentifier
        Thread.sleep(forTimeInterval: 0.2)
        let baseline = Self.sockets(pid)
        let clients = try (0..<20).map { _ in try HTTPTestConnection(port: server.port, timeout: 5) }
        for client in clients { try client.writeRaw(Array("GET /_up HTTP/1.1\r\nHost: x\r\n".utf8)) }
        Thread.sleep(forTimeInterval: 0.3)
        #expect(Self.sockets(pid) >= baseline + 20, "the heads are waited for")
        clients.forEach { $0.close() }
        let deadline = Date().addingTimeInterval(5)
        while Self.sockets(pid) > baseline, Date() < deadline { Thread.sleep(forTimeInterval: 0.05) }
        #expect(Self.sockets(pid) <= baseline)
    }

    /// As reported: ~800 feeds under `ulimit -n 1024`, scaled down (320 files: 64 connections).
    @Test func feedsAtTheDescriptorLimitLeaveAndTheServerRecovers() throws {
        let server = try ServerProcess(arguments: ["--log-level", "critical"], openFileLimit: 320)
        defer { server.stop() }
        let (process, port) = (server.process, server.port)
        let pid = process.processIdentifier
        try Self.prepare(port: port)
        let baseline = Self.sockets(pid)
        let feed = "GET /db/_changes?feed=continuous&since=now&heartbeat=60000 HTTP/1.1\r\nHost: x\r\n\r\n"
        for _ in 0..<3 {
            // More feeds than the server holds, all at once; they wait a moment, then leave.
            var feeds: [HTTPTestConnection] = []
            for _ in 0..<100 {
                guard let connection = try? HTTPTestConnection(port: port, timeout: 5) else { continue }
                try? connection.writeRaw(Array(feed.utf8))
                feeds.append(connection)
            }
            Thread.sleep(forTimeInterval: 0.5)
            feeds.forEach { $0.close() }
            Self.expectRecovery(port: port, pid: pid, baseline: baseline, within: 5)
        }
        #expect(process.isRunning)
    }
}
