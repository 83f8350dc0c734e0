import CouchCore
import CouchTestSupport
import Foundation
import Testing

/// The live event feed tells every state a job goes through, with its `_replicator`
/// document: running, progress, offline or crashing as soon as its peer fails (not once the
/// retries are exhausted), back to running, and suspended.
@Suite struct ReplicationEventTests {
    @Test func aFollowerHearsEveryStateOfAContinuousPullWithItsDocument() async throws {
        let (a, b) = (try TestServer(), try TestServer())
        defer { a.stop(); b.stop() }
        let proxy = try FaultyProxy(upstreamPort: b.port, faults: FaultyProxy.Faults())
        defer { proxy.stop() }
        try await b.call("PUT", "/source")
        try await b.fill("source", count: 30)
        let client = try HTTPTestConnection(port: a.port)
        defer { client.close() }
        #expect(try await offPool { try client.startStreaming("GET", "/_scheduler/jobs?feed=continuous") }.status == 200)
        var body: JSONObject = ["source": JSONValue(proxy.url + "/source"), "target": "copy", "create_target": true,
                                "continuous": true]
        try await a.call("PUT", "/_replicator/pull", body: .object(body))

        let events = EventLog(client)
        #expect(try await events.until { $0["status"] == "idle" && $0["completed"] == 30 })
        #expect(events.all.allSatisfy { $0["doc_id"] == "pull" && $0["database"] == "_replicator" })
        #expect(events.all.contains { $0["state"] == "running" && $0["status"] == "active" })
        let activeTask = try await a.call("GET", "/_active_tasks").json[0]
        #expect(activeTask?["doc_id"] == "pull" && activeTask?["database"] == "_replicator", "\(activeTask?.serializedString() ?? "")")

        proxy.goAway()
        #expect(try await events.until { $0["status"] == "offline" && $0["state"] == "crashing" })
        try proxy.comeBack()
        #expect(try await events.until(seconds: 20) { $0["status"] == "idle" && $0["state"] == "running" })

        body["_rev"] = try await a.call("GET", "/_replicator/pull").json["_rev"]
        body["suspended"] = true
        try await a.call("PUT", "/_replicator/pull", body: .object(body))
        #expect(try await events.until { $0["state"] == "suspended" })
    }
}

/// The events read so far from a `_scheduler/jobs?feed=continuous` stream.
final class EventLog: @unchecked Sendable {
    private let client: HTTPTestConnection
    private(set) var all: [JSONValue] = []

    init(_ client: HTTPTestConnection) { self.client = client }

    /// Reads events until one satisfies `condition` (true), or `seconds` pass (false).
    func until(seconds: Double = 10, _ condition: @escaping @Sendable (JSONValue) -> Bool) async throws -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            let line = try await offPool { [client] in try client.readLine(timeout: max(0.1, deadline.timeIntervalSinceNow)) }
            guard let line, !line.isEmpty, let event = try? JSONValue.parse(line) else { continue }
            all.append(event)
            if condition(event) { return true }
        }
        return false
    }
}
