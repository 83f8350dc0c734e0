import CouchCore
import CouchTestSupport
import Foundation
import Testing

/// Persistent jobs whose peers go wrong in ways that heal — a database deleted and created
/// again, a peer that fails (5xx) or rate-limits (429) — stay `crashing` and run again by
/// themselves, as CouchDB 3's scheduler keeps them; only what cannot heal fails.
@Suite struct HealingReplicationTests {
    func schedulerDocument(_ server: TestServer, _ id: String) async throws -> JSONValue {
        try await server.call("GET", "/_scheduler/docs/_replicator/\(id)").json
    }

    @Test func aJobWhoseLocalSourceIsDeletedCrashesAndResumesWhenItIsCreatedAgain() async throws {
        let a = try TestServer()
        defer { a.stop() }
        try await a.call("PUT", "/source")
        try await a.fill("source", count: 5)
        try await a.call("PUT", "/_replicator/local", body: [
            "source": "source", "target": "copy", "create_target": true, "continuous": true,
        ])
        #expect(try await eventually { try await a.documentCount("copy") == 5 })
        #expect(try await a.call("DELETE", "/source").status == 200)
        let crashing = try await poll { () async throws -> JSONValue? in
            let entry = try await schedulerDocument(a, "local")
            return entry["state"] == "crashing" ? entry : JSONValue?.none
        }
        #expect(crashing?["info"]?["error"]?.stringValue?.contains("db_not_found") == true, "\(crashing?.serializedString() ?? "")")
        #expect(try await a.call("GET", "/_replicator/local").json["_replication_state"] != "failed")
        try await a.call("PUT", "/source")
        try await a.call("PUT", "/source/again", body: ["n": 1])
        #expect(try await eventually(30) { try await a.call("GET", "/copy/again").status == 200 })
        #expect(try await eventually { try await schedulerDocument(a, "local")["state"] == "running" })
    }

    @Test func aPullWhoseSourceIsDeletedAndCreatedAgainFinishesIdentical() async throws {
        let (a, b) = (try TestServer(), try TestServer())
        defer { a.stop(); b.stop() }
        try await b.call("PUT", "/source")
        try await b.fill("source", count: 10)
        try await a.call("PUT", "/_replicator/pull", body: [
            "source": JSONValue(b.url + "/source"), "target": "copy", "create_target": true, "continuous": true,
        ])
        #expect(try await eventually { try await a.documentCount("copy") == 10 })
        #expect(try await b.call("DELETE", "/source").status == 200)
        #expect(try await eventually { try await schedulerDocument(a, "pull")["state"] == "crashing" })
        // Created again, with other documents.
        try await b.call("PUT", "/source")
        try await b.fill("source", count: 3, prefix: "new")
        #expect(try await eventually(30) { try await a.documentCount("copy") == 13 })
        for id in ["new00000", "new00001", "new00002"] {
            let original = try await b.call("GET", "/source/\(id)").json
            #expect(try await a.call("GET", "/copy/\(id)").json == original)
        }
        #expect(try await schedulerDocument(a, "pull")["state"] == "running")
    }
}
