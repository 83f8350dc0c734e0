import CouchCore
import CouchTestSupport
import Foundation
import Testing

@Suite struct ConcurrentFeedsTests {
    /// A thousand waiting feeds cost connections, not threads, and all wake on one commit.
    /// The server runs as its own process so its threads are counted alone.
    @Test func aThousandLongpollFeedsShareAFewThreads() throws {
        let server = try ServerProcess(arguments: ["--log-level", "warning"])
        defer { server.stop() }
        #expect(try httpRequest(port: server.port, "PUT", "/db").status == 201)
        let before = try #require(server.status("Threads"))
        var feeds: [HTTPTestConnection] = []
        for _ in 0..<1000 {
            let connection = try HTTPTestConnection(port: server.port, timeout: 30)
            try connection.writeRaw(Array("GET /db/_changes?feed=longpoll&since=0&timeout=60000 HTTP/1.1\r\nHost: x\r\n\r\n".utf8))
            feeds.append(connection)
        }
        // The database is empty: every feed, however late the server reads it, waits for the next change.
        Thread.sleep(forTimeInterval: 0.5)
        let during = try #require(server.status("Threads"))
        #expect(during - before < 16, "threads before \(before), with 1000 feeds \(during)")

        _ = try httpRequest(port: server.port, "PUT", "/db/wake", body: Array("{}".utf8))
        var woken = 0
        for connection in feeds {
            let response = try connection.readResponse()
            let body = try JSONValue.parse(response.body)
            if body["results"]?[0]?["id"] == "wake" { woken += 1 }
        }
        #expect(woken == 1000)
    }
}

@Suite struct IdleFeedTests {
    /// CPU time (user + system, in clock ticks) the process has used.
    static func cpuTicks(_ pid: Int32) -> Int? {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")") else { return nil }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 13, let user = Int(fields[11]), let system = Int(fields[12]) else { return nil }
        return user + system
    }

    /// Waiting feeds cost no CPU: two hundred idle continuous feeds over two seconds.
    @Test func idleFeedsCostNoCPU() throws {
        let server = try ServerProcess(arguments: ["--log-level", "warning"])
        defer { server.stop() }
        #expect(try httpRequest(port: server.port, "PUT", "/db").status == 201)
        var feeds: [HTTPTestConnection] = []
        for _ in 0..<200 {
            let connection = try HTTPTestConnection(port: server.port)
            _ = try connection.startStreaming("GET", "/db/_changes?feed=continuous&since=now&heartbeat=60000")
            feeds.append(connection)
        }
        Thread.sleep(forTimeInterval: 0.3)
        let before = try #require(Self.cpuTicks(server.process.processIdentifier))
        Thread.sleep(forTimeInterval: 2)
        let after = try #require(Self.cpuTicks(server.process.processIdentifier))
        // Clock ticks are 10 ms: a busy loop would burn ~200 per core in 2 s.
        #expect(after - before <= 5, "server used \(after - before) ticks while idle")
        #expect(try #require(server.status("Threads")) < 40)
        _ = try httpRequest(port: server.port, "PUT", "/db/after", body: Array("{}".utf8))
        for feed in feeds.prefix(10) {
            let line = try #require(try feed.readLine(timeout: 5))
            #expect(try JSONValue.parse(line)["id"] == "after")
        }
    }

    /// A `since` from an earlier response resumes correctly after a restart and a compaction.
    @Test func sinceSurvivesRestartAndCompaction() throws {
        let first = try TestServer()
        try first.createDatabase("db")
        for index in 0..<5 { _ = try first.put("db", "d\(index)", "{}") }
        let lastSeq = try #require(try first.json("GET", "/db/_changes").json["last_seq"])
        first.stop(keepData: true)
        let second = try TestServer(directory: first.directory)
        defer { second.stop() }
        _ = try second.json("POST", "/db/_compact", body: "")
        Thread.sleep(forTimeInterval: 0.3)
        _ = try second.put("db", "new", "{}")
        let since = lastSeq.serializedString().replacingOccurrences(of: "\"", with: "%22")
        let changes = try second.json("GET", "/db/_changes?since=\(since)").json
        #expect(changes["results"]?.arrayValue?.map { $0["id"]?.stringValue } == ["new"])
    }
}
