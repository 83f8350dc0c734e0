import CouchCore
import CouchTestSupport
import Foundation
import Testing

/// A peer that stops answering shows in `_active_tasks` as soon as a request fails, not
/// when the request's retries have run out.
@Suite struct ReplicationFaultVisibilityTests {
    @Test func anUnreachableSourceShowsOfflineAtOnce() async throws {
        let (a, b) = (try TestServer(), try TestServer())
        defer { a.stop(); b.stop() }
        try await b.call("PUT", "/source")
        try await b.fill("source", count: 3)
        let started = try await a.replicate(["source": JSONValue("\(b.url)/source"), "target": "target",
                                             "create_target": true, "continuous": true])
        #expect(started.status == 202)
        func task() async throws -> JSONValue? { try await a.call("GET", "/_active_tasks").json.arrayValue?.first }
        var deadline = Date().addingTimeInterval(10)
        while try await task()?["status"] != "idle", Date() < deadline { try await Task.sleep(nanoseconds: 50_000_000) }
        #expect(try await task()?["status"] == "idle")
        #expect(try await task()?["last_error"] == .null)

        b.stop(keepData: true)
        let stopped = Date()
        deadline = Date().addingTimeInterval(7)
        while try await task()?["status"] == "idle", Date() < deadline { try await Task.sleep(nanoseconds: 50_000_000) }
        let failing = try #require(try await task())
        #expect(failing["status"] == "offline" || failing["status"] == "crashing", "\(failing)")
        #expect(failing["last_error"] != .null)
        // A request's five retries take 7.75 s (250 ms doubling): seen before they run out, most
        // often within a second, with room for a loaded or sanitized machine (5.2 s under
        // ThreadSanitizer once).
        #expect(Date().timeIntervalSince(stopped) < 7, "reported within the retries, not after them")
        _ = try await a.replicate(["source": JSONValue("\(b.url)/source"), "target": "target", "continuous": true, "cancel": true])
    }
}

/// A document the source cannot serve readably is counted as a failure; the job goes on.
@Suite struct UnfetchableDocumentTests {
    @Test func aDocumentThatCannotBeFetchedIsCountedAndSkipped() async throws {
        let source = try LoopbackHTTPServer { request in
            switch (request.method, request.path) {
            case ("GET", "/db/"), ("GET", "/db"):
                return .respond(.json(200, ["db_name": "db", "update_seq": 2, "instance_start_time": "0"]))
            case ("GET", "/db/_changes"):
                return .respond(.json(200, ["results": [
                    ["seq": 1, "id": "good", "changes": [["rev": "1-a"]]],
                    ["seq": 2, "id": "bad", "changes": [["rev": "1-b"]]]], "last_seq": 2]))
            case ("POST", "/db/_bulk_get"):
                return .respond(.json(200, ["results": "not what a peer sends"]))
            case ("GET", "/db/good"):
                return .respond(.json(200, [["ok": ["_id": "good", "_rev": "1-a", "_revisions": ["start": 1, "ids": ["a"]]]]]))
            case ("GET", "/db/bad"):
                return .respond(.json(414, ["error": "uri_too_long", "reason": "URL is too long"]))
            default:
                return .respond(.json(404, ["error": "not_found", "reason": "missing"]))
            }
        }
        defer { source.stop() }
        let target = try TestServer()
        defer { target.stop() }
        let result = try await target.replicate(["source": JSONValue("http://127.0.0.1:\(source.port)/db"), "target": "copy",
                                                 "create_target": true, "use_checkpoints": false])
        #expect(result.json["ok"] == true, "\(result.json)")
        #expect(try await target.call("GET", "/copy/good").status == 200)
        #expect(try await target.call("GET", "/copy/bad").status == 404)
    }
}
