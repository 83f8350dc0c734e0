import CouchCore
import CouchServer
import CouchTestSupport
import Foundation
import Testing

@Suite struct LimitsTests {
    @Test func documentsAboveTheMaximumSizeAreRefused() throws {
        var configuration = ServerConfiguration.testing()
        configuration.maximumDocumentSize = 1000
        let server = try TestServer(configuration: configuration)
        defer { server.stop() }
        try server.createDatabase("db")
        let big = #"{"text":"\#(String(repeating: "x", count: 2000))"}"#
        let put = try server.json("PUT", "/db/big", body: big)
        #expect(put.status == 413)
        #expect(put.json == ["error": "document_too_large", "reason": "big"])
        #expect(try server.json("POST", "/db", body: #"{"_id":"posted","text":"\#(String(repeating: "y", count: 2000))"}"#).status == 413)
        let bulk = try server.json("POST", "/db/_bulk_docs", body: #"{"docs":[{"_id":"small"},{"_id":"large","t":"\#(String(repeating: "z", count: 2000))"}]}"#)
        #expect(bulk.status == 413)
        #expect(bulk.json == ["error": "document_too_large", "reason": "large"])
        // Nothing of the refused request was written; documents under the limit are fine.
        #expect(try server.request("GET", "/db/small").status == 404)
        #expect(try server.request("PUT", "/db/fine", body: #"{"text":"short"}"#).status == 201)
        let many = (0..<50).map { #"{"_id":"d\#($0)","t":"\#(String(repeating: "w", count: 100))"}"# }.joined(separator: ",")
        #expect(try server.request("POST", "/db/_bulk_docs", body: #"{"docs":[\#(many)]}"#).status == 201)
    }

    @Test func requestBodyURLAndHeaderSizesAreBounded() throws {
        let server = try TestServer { listener in
            listener.maximumBodySize = 10_000
            listener.maximumURLLength = 1_000
            listener.maximumHeaderSize = 4_096
        }
        defer { server.stop() }
        try server.createDatabase("db")
        // Refused from its Content-Length, before the client sends it.
        let connection = try HTTPTestConnection(port: server.port, timeout: 5)
        let body = try connection.sendRaw(Array(
            "PUT /db/doc HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 20000\r\nExpect: 100-continue\r\n\r\n".utf8))
        #expect(body.status == 413)
        #expect(try JSONValue.parse(body.body)["error"] == "too_large")
        connection.close()
        #expect(try server.request("GET", "/db/" + String(repeating: "u", count: 2_000)).status == 414)
        let headers = try server.request("GET", "/db", headers: [("X-Padding", String(repeating: "h", count: 8_000))])
        #expect(headers.status == 431)
        #expect(try server.request("GET", "/db", headers: [("X-Padding", String(repeating: "h", count: 1_000))]).status == 200)
        // Far beyond the connection's buffer, libmicrohttpd refuses it itself.
        let huge = try? server.request("GET", "/db", headers: [("X-Padding", String(repeating: "h", count: 300_000))])
        #expect(huge.map { $0.status >= 400 } ?? true)
    }

    @Test func concurrentConnectionsAreCapped() throws {
        let server = try TestServer { listener in
            listener.threadCount = 1
            listener.connectionLimit = 2
        }
        defer { server.stop() }
        let first = try HTTPTestConnection(port: server.port, timeout: 5)
        let second = try HTTPTestConnection(port: server.port, timeout: 5)
        #expect(try first.request("GET", "/_up").status == 200)
        #expect(try second.request("GET", "/_up").status == 200)
        // A third is refused at once (503) while two are open...
        let third = try? HTTPTestConnection(port: server.port, timeout: 2)
        let refused = try? third?.sendRaw(Array("GET /_up HTTP/1.1\r\nHost: x\r\n\r\n".utf8))
        #expect(refused == nil || refused?.status == 503)
        // ...and accepted once one closes.
        first.close()
        Thread.sleep(forTimeInterval: 0.2)
        #expect(try httpRequest(port: server.port, "GET", "/_up").status == 200)
        second.close()
    }

    @Test func idleConnectionsAreClosedButWaitingFeedsAreNot() throws {
        let server = try TestServer { $0.idleTimeoutSeconds = 1 }
        defer { server.stop() }
        try server.createDatabase("db")
        let connection = try HTTPTestConnection(port: server.port, timeout: 10)
        #expect(try connection.request("GET", "/_up").status == 200)
        #expect(connection.connectionCount == 1)
        Thread.sleep(forTimeInterval: 2.5)
        // The server closed the idle connection; the client had to open a new one.
        #expect(try connection.request("GET", "/_up").status == 200)
        #expect(connection.connectionCount == 2)

        // A longpoll feed waits past the idle timeout and still answers.
        let feed = try HTTPTestConnection(port: server.port, timeout: 10)
        let started = Date()
        let response = try feed.request("GET", "/db/_changes?feed=longpoll&since=now&timeout=3000")
        #expect(response.status == 200)
        #expect(Date().timeIntervalSince(started) > 2.5)
        #expect(try JSONValue.parse(response.body)["last_seq"] != nil)
    }
}
