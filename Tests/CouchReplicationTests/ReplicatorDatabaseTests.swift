import CouchCore
import CouchReplication
import CouchServer
import CouchTestSupport
import Foundation
import Testing

/// `_replicator` documents over real HTTP between two servers: they start, restart and
/// stop jobs, get their outcome written back, survive restarts, and show in `_scheduler`.
@Suite(.serialized) struct ReplicatorDatabaseTests {
    func schedulerDocument(_ server: TestServer, _ id: String) async throws -> JSONValue {
        try await server.call("GET", "/_scheduler/docs/_replicator/\(id)").json
    }

    func document(_ server: TestServer, _ id: String) async throws -> JSONValue {
        try await server.call("GET", "/_replicator/\(id)").json
    }

    @Test func aDocumentStartsUpdatesAndStopsAContinuousJob() async throws {
        let (a, b) = (try TestServer(), try TestServer())
        defer { a.stop(); b.stop() }
        #expect(try await a.call("GET", "/_replicator").status == 200, "created at the first start")
        try await a.call("PUT", "/source")
        try await b.call("PUT", "/target")
        try await a.fill("source", count: 20)
        let put = try await a.call("PUT", "/_replicator/r1", body: [
            "source": "source", "target": JSONValue(b.url + "/target"), "continuous": true,
        ])
        #expect(put.status == 201)
        #expect(try await eventually { try await b.documentCount("target") == 20 })

        let entry = try await schedulerDocument(a, "r1")
        #expect(entry["state"] == "running", "\(entry.serializedString())")
        #expect(entry["database"] == "_replicator")
        #expect(entry["doc_id"] == "r1")
        let jobID = try #require(entry["id"]?.stringValue)
        #expect(jobID.hasSuffix("+continuous"))
        let jobs = try await a.call("GET", "/_scheduler/jobs").json
        #expect(jobs["total_rows"] == 1)
        #expect(jobs["jobs"]?[0]?["doc_id"] == "r1")
        #expect(jobs["jobs"]?[0]?["id"] == JSONValue(jobID))
        let types = jobs["jobs"]?[0]?["history"]?.arrayValue?.compactMap { $0["type"]?.stringValue } ?? []
        #expect(types.contains("added") && types.contains("started"))
        // `+` in a path is a space (CouchDB 3.4's `decode_plus_to_space`): a job ID's is sent as `%2B`.
        let jobPath = "/_scheduler/jobs/" + jobID.replacingOccurrences(of: "+", with: "%2B")
        #expect(try await a.call("GET", jobPath).json["doc_id"] == "r1")
        #expect(try await a.call("GET", "/_scheduler/jobs/nothing").status == 404)
        #expect(try await a.call("GET", "/_scheduler/docs/_replicator/nothing").status == 404)
        let docs = try await a.call("GET", "/_scheduler/docs").json
        #expect(docs["total_rows"] == 1)
        #expect(try await a.call("GET", "/_scheduler/docs?skip=1").json["docs"]?.arrayValue?.isEmpty == true)
        let limited = try await a.call("GET", "/_scheduler/jobs?limit=0").json
        #expect(limited["total_rows"] == 1 && limited["jobs"] == [] && limited["offset"] == 0)
        #expect(try await a.call("GET", "/_scheduler/jobs?limit=-1").status == 400)

        // Continuous: CouchDB 3 writes no state into the document while it runs.
        let written = try await document(a, "r1")
        #expect(written["_replication_state"] == nil)
        try await a.call("PUT", "/source/live", body: ["n": 1])
        #expect(try await eventually { try await b.documentCount("target") == 21 })

        // A new definition restarts the job.
        var body = written.objectValue!
        body["target"] = JSONValue(b.url + "/target2")
        body["create_target"] = true
        #expect(try await a.call("PUT", "/_replicator/r1", body: .object(body)).status == 201)
        #expect(try await eventually { try await b.documentCount("target2") == 21 })
        let newID = try await schedulerDocument(a, "r1")["id"]
        #expect(newID != JSONValue(jobID) && newID != nil && newID != .null)
        #expect(try await a.call("GET", "/_scheduler/jobs").json["total_rows"] == 1)

        // Deleting the document stops the job.
        let rev = try #require(try await document(a, "r1")["_rev"]?.stringValue)
        #expect(try await a.call("DELETE", "/_replicator/r1?rev=\(rev)").status == 200)
        #expect(try await eventually { try await a.call("GET", "/_scheduler/jobs").json["total_rows"] == 0 })
        try await a.call("PUT", "/source/after", body: ["n": 2])
        try await Task.sleep(nanoseconds: 400_000_000)
        #expect(try await b.documentCount("target2") == 21)
        #expect(try await a.call("GET", "/_scheduler/docs").json["total_rows"] == 0)
    }

    @Test func aOneShotDocumentCompletesAndStaysCompletedAfterARestart() async throws {
        let (a, b) = (try TestServer(), try TestServer())
        defer { b.stop() }
        try await a.call("PUT", "/source")
        try await b.call("PUT", "/target")
        try await a.fill("source", count: 10)
        try await a.call("PUT", "/_replicator/once", body: ["source": "source", "target": JSONValue(b.url + "/target")])
        let completed = try await poll { () async throws -> JSONValue? in
            let doc = try await document(a, "once")
            return doc["_replication_state"] == "completed" ? doc : JSONValue?.none
        }
        let doc = try #require(completed)
        #expect(doc["_replication_stats"]?["docs_written"] == 10, "\(doc.serializedString())")
        #expect(doc["_replication_state_time"]?.stringValue != nil)
        #expect(try await b.documentCount("target") == 10)
        let entry = try await schedulerDocument(a, "once")
        #expect(entry["state"] == "completed")
        #expect(entry["id"] == .null)
        #expect(entry["info"]?["docs_written"] == 10)
        #expect(try await a.call("GET", "/_scheduler/jobs").json["total_rows"] == 0)

        a.stop(keepData: true)
        let restarted = try TestServer(directory: a.directory)
        defer { restarted.stop() }
        try await restarted.call("PUT", "/source/later", body: ["n": 1])
        try await Task.sleep(nanoseconds: 500_000_000)
        #expect(try await b.documentCount("target") == 10, "a completed document is not run again")
        #expect(try await schedulerDocument(restarted, "once")["state"] == "completed")
    }

    @Test func replicationDocumentsAreValidatedOwnedAndTheirCredentialsHidden() async throws {
        let a = try TestServer(configuration: .testing(admins: ["admin": "secret"]))
        defer { a.stop() }
        let admin = basicAuthorization("admin", "secret")
        let bob = basicAuthorization("bob", "pw")
        #expect(try await a.call("PUT", "/_users/org.couchdb.user:bob", body: [
            "name": "bob", "password": "pw", "roles": [], "type": "user",
        ]).status == 201)
        #expect(try await a.call("PUT", "/_replicator/_security", headers: [admin], body: ["admins": [:], "members": [:]]).status == 200)

        let unreachable = "http://127.0.0.1:9/db"
        let missingContext = try await a.call("PUT", "/_replicator/bob1", headers: [bob],
                                              body: ["source": JSONValue(unreachable), "target": "t"])
        #expect(missingContext.status == 403)
        #expect(missingContext.json["reason"] == "The `user_ctx' property is missing (it is optional for admins only).")
        let badFlag = try await a.call("PUT", "/_replicator/bad", headers: [admin],
                                       body: ["source": "s", "target": "t", "continuous": "yes"])
        #expect(badFlag.status == 403)
        #expect(badFlag.json["reason"] == "The `continuous' field must be a boolean.")
        let noSource = try await a.call("PUT", "/_replicator/bad", headers: [admin], body: ["target": "t"])
        #expect(noSource.json["reason"] == "The `source' property must exist and be either a string or an object.")

        let own = try await a.call("PUT", "/_replicator/bob2", headers: [bob], body: [
            "source": JSONValue(unreachable), "target": "http://bob:hidden@127.0.0.1:9/t", "user_ctx": ["name": "bob"],
        ])
        #expect(own.status == 201, "\(own.json.serializedString())")
        #expect(try await a.call("GET", "/_replicator/bob2", headers: [bob]).json["owner"] == "bob")
        #expect(try await a.call("GET", "/_replicator/bob2", headers: [bob]).json["target"] == "http://bob:hidden@127.0.0.1:9/t")

        #expect(try await a.call("PUT", "/_replicator/admins", headers: [admin], body: [
            "source": JSONValue(unreachable), "target": "http://admin:secret@127.0.0.1:9/t",
            "_replication_state": "failed",
        ]).status == 201, "the replicator's own members are accepted in a replicator database")
        let seenByBob = try await a.call("GET", "/_replicator/admins", headers: [bob]).json
        #expect(seenByBob["target"] == "http://127.0.0.1:9/t", "\(seenByBob.serializedString())")
        #expect(try await a.call("GET", "/_replicator/admins", headers: [admin]).json["target"] == "http://admin:secret@127.0.0.1:9/t")
        let rev = try #require(seenByBob["_rev"]?.stringValue)
        #expect(try await a.call("PUT", "/_replicator/admins", headers: [bob], body: [
            "_rev": JSONValue(rev), "source": "x", "target": "y", "user_ctx": ["name": "bob"], "owner": "admin",
        ]).json["reason"] == "Can't update replication documents from other users.")
        #expect(try await a.call("GET", "/_scheduler/docs", headers: [bob]).status == 401)
    }
}
