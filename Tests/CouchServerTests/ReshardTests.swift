import CouchCore
import CouchServer
import CouchTestSupport
import Foundation
import Testing

/// `/_reshard` over real HTTP, after CouchDB's reshard tests: the summary and global state,
/// split jobs by database, node, range or shard name with CouchDB's validation errors, the
/// shard map (`/db/_shards`) they change, documents untouched, and server admins only.
@Suite struct ReshardTests {
    static let admin = basicAuthorization("admin", "admin-pass-7Kd")

    static func server() throws -> TestServer {
        try TestServer(configuration: .testing(admins: ["admin": "admin-pass-7Kd"]))
    }

    func json(_ server: TestServer, _ method: String, _ path: String, _ body: JSONValue? = nil) throws -> (status: Int, json: JSONValue) {
        try server.json(method, path, headers: [Self.admin] + (body == nil ? [] : [("Content-Type", "application/json")]),
                        body: body?.serializedString())
    }

    @Test func summaryStateAndValidation() throws {
        let server = try Self.server()
        defer { server.stop() }
        #expect(try json(server, "PUT", "/db1?q=1").status == 201)
        #expect(try json(server, "GET", "/_reshard").json == [
            "state": "running", "state_reason": .null, "completed": 0, "failed": 0, "running": 0, "stopped": 0, "total": 0,
        ])
        #expect(try json(server, "GET", "/_reshard/state").json == ["state": "running", "reason": .null])
        #expect(try json(server, "GET", "/_reshard/jobs").json == ["total_rows": 0, "offset": 0, "jobs": []])

        #expect(try json(server, "PUT", "/_reshard/state", ["state": "stopped", "reason": "xyz"]).json == ["ok": true])
        #expect(try json(server, "GET", "/_reshard/state").json == ["state": "stopped", "reason": "xyz"])
        #expect(try json(server, "PUT", "/_reshard/state", ["state": "stopped"]).status == 200)
        #expect(try json(server, "GET", "/_reshard/state").json["reason"] == "Cluster-wide resharding stopped by the user")
        #expect(try json(server, "PUT", "/_reshard/state", ["state": "running"]).status == 200)
        #expect(try json(server, "GET", "/_reshard/state").json == ["state": "running", "reason": .null])
        #expect(try json(server, "PUT", "/_reshard/state", ["state": "paused"]).json["reason"] == "State field not `running` or `stopped`")
        #expect(try json(server, "PUT", "/_reshard/state", [:]).json["reason"] == "Expected a `state` field")

        // CouchDB's answers to bad jobs, checked in its order.
        let refusals: [(JSONValue, String)] = [
            (["type": "split", "db": "db1", "node": "badnode"], "`node` is not a valid node name"),
            (["type": "split", "db": "nodb", "node": "couchette@127.0.0.1"], "Invalid `db`"),
            (["type": "split", "db": "nodb", "range": "randomgarbage"], "Invalid `db`"),
            (["type": "split", "db": "db1", "range": "randomgarbage"], "Invalid `range`"),
            (["type": "split", "db": "db1", "range": "80000000-7fffffff"], "Invalid `range`"),
            (["type": "merge", "db": "db1"], "`job type must be `split`"),
            (["type": "split"], "Must specify at least `db` or `shard`"),
            (["type": "split", "shard": "x"], "`shard` is invalid"),
        ]
        for (body, reason) in refusals {
            let (status, answer) = try json(server, "POST", "/_reshard/jobs", body)
            #expect(status == 400)
            #expect(answer == ["error": "bad_request", "reason": JSONValue(reason)], "\(body)")
        }
        // A range the database does not have; jobs that do not exist.
        #expect(try json(server, "POST", "/_reshard/jobs", ["type": "split", "db": "db1", "range": "00000000-7fffffff"]).status == 404)
        #expect(try json(server, "GET", "/_reshard/jobs/badjobid").status == 404)
        #expect(try json(server, "DELETE", "/_reshard/jobs/badjobid").status == 404)
        #expect(try json(server, "GET", "/_reshard/jobs/badjobid/state").status == 404)
        let wrong = try server.request("POST", "/_reshard/state", headers: [Self.admin])
        #expect(wrong.status == 405)
        #expect(wrong.header("Allow") == "GET,HEAD,PUT")

        // Server admins only.
        #expect(try server.json("GET", "/_reshard").status == 401)
        #expect(try server.json("GET", "/db1/_shards").status == 401)
    }

    @Test func splitsRewriteTheShardMapAndKeepTheDocuments() throws {
        let server = try Self.server()
        defer { server.stop() }
        let node = try json(server, "GET", "/_membership").json["all_nodes"]?.arrayValue?.first ?? .null
        #expect(try json(server, "PUT", "/db2?q=2").status == 201)
        let documents = (1...20).map { #"{"_id":"doc\#($0)"}"# }.joined(separator: ",")
        #expect(try json(server, "POST", "/db2/_bulk_docs", try JSONValue.parse(Array(#"{"docs":[\#(documents)]}"#.utf8))).status == 201)
        let before = try json(server, "GET", "/db2/_all_docs").json
        #expect(try json(server, "GET", "/db2/_shards").json == ["shards": ["00000000-7fffffff": [node], "80000000-ffffffff": [node]]])

        // One job per shard of the node; each completes at once.
        var (status, created) = try json(server, "POST", "/_reshard/jobs", ["type": "split", "db": "db2", "node": node])
        #expect(status == 201)
        let jobs = created.arrayValue ?? []
        #expect(jobs.count == 2)
        #expect(jobs.allSatisfy { $0["ok"] == true && $0["node"] == node && $0["shard"]?.stringValue?.hasPrefix("shards/") == true })
        let id = jobs.first?["id"]?.stringValue ?? ""
        let job = try json(server, "GET", "/_reshard/jobs/\(id)").json
        #expect(job["type"] == "split")
        #expect(job["source"] == jobs.first?["shard"])
        #expect(job["target"]?.arrayValue?.count == 2)
        #expect(job["job_state"] == "completed")
        #expect(job["split_state"] == "completed")
        #expect(job["history"]?.arrayValue?.last?["type"] == "completed")
        #expect(try json(server, "GET", "/_reshard/jobs/\(id)/state").json == ["state": "completed", "reason": .null])
        #expect(try json(server, "GET", "/db2/_shards").json["shards"]?.objectValue?.keys.sorted()
                == ["00000000-3fffffff", "40000000-7fffffff", "80000000-bfffffff", "c0000000-ffffffff"])
        #expect(try json(server, "GET", "/db2").json["cluster"]?["q"] == 4)
        #expect(try json(server, "GET", "/db2/_all_docs").json == before)
        #expect(try json(server, "GET", "/_reshard").json["completed"] == 2)

        // While stopped, a job waits; it runs when resharding runs again. By shard name too.
        #expect(try json(server, "PUT", "/_reshard/state", ["state": "stopped", "reason": "later"]).status == 200)
        let shard = job["target"]?.arrayValue?.first ?? .null
        (status, created) = try json(server, "POST", "/_reshard/jobs", ["type": "split", "shard": shard])
        #expect(status == 201)
        let waiting = created.arrayValue?.first?["id"]?.stringValue ?? ""
        #expect(try json(server, "GET", "/_reshard/jobs/\(waiting)/state").json == ["state": "stopped", "reason": "Shard splitting disabled"])
        #expect(try json(server, "PUT", "/_reshard/jobs/\(waiting)/state", ["state": "running"]).status == 500)
        #expect(try json(server, "PUT", "/_reshard/state", ["state": "running"]).status == 200)
        #expect(try json(server, "GET", "/_reshard/jobs/\(waiting)/state").json["state"] == "completed")
        #expect(try json(server, "GET", "/db2/_shards").json["shards"]?.objectValue?.count == 5)
        #expect(try json(server, "GET", "/db2/_all_docs").json == before)

        #expect(try json(server, "DELETE", "/_reshard/jobs/\(waiting)").json == ["ok": true])
        #expect(try json(server, "GET", "/_reshard/jobs").json["total_rows"] == 2)
        // Deleting the database ends its jobs.
        #expect(try json(server, "DELETE", "/db2").status == 200)
        #expect(try json(server, "GET", "/_reshard/jobs").json["jobs"] == [])
        #expect(try json(server, "GET", "/_reshard").json["total"] == 0)
    }
}
