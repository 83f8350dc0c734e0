import CouchCore
import CouchTestSupport
import Foundation
import Testing

@Suite struct ConcurrentFeedsTests {
    static func threadCount() -> Int {
        (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task").count) ?? -1
    }

    /// A thousand waiting feeds cost connections, not threads, and all wake on one commit.
    @Test func aThousandLongpollFeedsShareAFewThreads() throws {
        let server = try TestServer()
        defer { server.stop() }
        try server.createDatabase("db")
        let before = Self.threadCount()
        var feeds: [HTTPTestConnection] = []
        for _ in 0..<1000 {
            let connection = try HTTPTestConnection(port: server.port, timeout: 30)
            try connection.writeRaw(Array("GET /db/_changes?feed=longpoll&since=now&timeout=60000 HTTP/1.1\r\nHost: x\r\n\r\n".utf8))
            feeds.append(connection)
        }
        var waiting = 0
        for _ in 0..<200 where waiting < 1000 {
            Thread.sleep(forTimeInterval: 0.05)
            waiting = server.listener.openStreamCount
        }
        #expect(waiting == 1000)
        let during = Self.threadCount()
        #expect(during - before < 32, "threads before \(before), with 1000 feeds \(during)")

        _ = try server.put("db", "wake", "{}")
        var woken = 0
        for connection in feeds {
            let response = try connection.readResponse()
            let body = try JSONValue.parse(response.body)
            if body["results"]?[0]?["id"] == "wake" { woken += 1 }
        }
        #expect(woken == 1000)
    }
}
