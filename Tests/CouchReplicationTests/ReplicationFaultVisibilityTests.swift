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
        deadline = Date().addingTimeInterval(5)
        while try await task()?["status"] == "idle", Date() < deadline { try await Task.sleep(nanoseconds: 50_000_000) }
        let failing = try #require(try await task())
        #expect(failing["status"] == "offline" || failing["status"] == "crashing", "\(failing)")
        #expect(failing["last_error"] != .null)
        #expect(Date().timeIntervalSince(stopped) < 2, "reported within the first retry, not after them")
        _ = try await a.replicate(["source": JSONValue("\(b.url)/source"), "target": "target", "continuous": true, "cancel": true])
    }
}
