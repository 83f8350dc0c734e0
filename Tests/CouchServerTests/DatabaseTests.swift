import CouchCore
import CouchTestSupport
import Foundation
import Testing

@Suite struct DatabaseTests {
    @Test func createReadDelete() throws {
        let server = try TestServer()
        defer { server.stop() }
        let created = try server.json("PUT", "/db")
        #expect(created.status == 201)
        #expect(created.json == ["ok": true])
        #expect(try server.json("PUT", "/db").status == 412)
        #expect(try server.json("PUT", "/db").json["error"]?.stringValue == "file_exists")

        let (status, info) = try server.json("GET", "/db")
        #expect(status == 200)
        #expect(info["db_name"]?.stringValue == "db")
        #expect(info["doc_count"]?.intValue == 0)
        #expect(info["doc_del_count"]?.intValue == 0)
        #expect(info["update_seq"] != nil)
        #expect(info["instance_start_time"]?.stringValue != nil)
        #expect(info["sizes"]?["file"]?.intValue ?? 0 > 0)
        #expect(info["compact_running"]?.boolValue == false)
        #expect(try server.request("HEAD", "/db").status == 200)

        #expect(try server.json("DELETE", "/db").json == ["ok": true])
        let missing = try server.json("GET", "/db")
        #expect(missing.status == 404)
        #expect(missing.json == ["error": "not_found", "reason": "Database does not exist."])
        #expect(try server.request("HEAD", "/db").status == 404)
        #expect(try server.json("DELETE", "/db").status == 404)
    }

    @Test func illegalNamesAreRefusedAndNeverEscapeTheDataDirectory() throws {
        let server = try TestServer()
        defer { server.stop() }
        for name in ["Upper", "1abc", "_private", "a%20b", "..%2F..%2Fetc", "%2E%2E", "a%2F..%2F..%2Fb"] {
            let (status, json) = try server.json("PUT", "/" + name)
            #expect(status == 400, "\(name)")
            #expect(json["error"]?.stringValue == "illegal_database_name", "\(name)")
        }
        try server.createDatabase("a%2Fb")
        try server.createDatabase("x%24%28%29%2B-_1")
        let files = try FileManager.default.contentsOfDirectory(atPath: server.directory)
        // `_replicator` exists from the first start, as CouchDB creates it.
        #expect(files.filter { $0.hasSuffix(".couch") }.sorted() == ["_replicator.couch", "a%2Fb.couch", "x%24%28%29%2B-_1.couch"])
        #expect(try server.json("GET", "/_all_dbs").json == ["_replicator", "a/b", "x$()+-_1"])
        #expect(try server.json("GET", "/a%2Fb").json["db_name"]?.stringValue == "a/b")
    }

    @Test func ensureFullCommitEchoesTheInstanceStartTime() throws {
        let server = try TestServer()
        defer { server.stop() }
        try server.createDatabase("db")
        let start = try #require(try server.json("GET", "/db").json["instance_start_time"]?.stringValue)
        let (status, json) = try server.json("POST", "/db/_ensure_full_commit", body: "")
        #expect(status == 201)
        #expect(json == ["ok": true, "instance_start_time": JSONValue(start)])
        server.stop(keepData: true)
        let restarted = try TestServer(directory: server.directory)
        defer { restarted.stop() }
        #expect(try restarted.json("GET", "/db").json["instance_start_time"]?.stringValue == start)
    }

    @Test func revsLimitIsStoredAndValidated() throws {
        let server = try TestServer()
        defer { server.stop() }
        try server.createDatabase("db")
        #expect(try server.json("GET", "/db/_revs_limit").json == 1000)
        #expect(try server.json("PUT", "/db/_revs_limit", body: "3").json == ["ok": true])
        #expect(try server.json("GET", "/db/_revs_limit").json == 3)
        #expect(try server.json("PUT", "/db/_revs_limit", body: "\"x\"").status == 400)

        var rev = try server.put("db", "doc", "{}")
        for index in 1...5 { rev = try server.put("db", "doc", #"{"_rev":"\#(rev)","n":\#(index)}"#) }
        let history = try server.json("GET", "/db/doc?revs=true").json["_revisions"]
        #expect(history?["start"]?.intValue == 6)
        #expect(history?["ids"]?.arrayValue?.count == 3)
    }

    @Test func compactionDropsOldRevisionBodies() throws {
        let server = try TestServer()
        defer { server.stop() }
        try server.createDatabase("db")
        let first = try server.put("db", "doc", #"{"v":1}"#)
        _ = try server.put("db", "doc", #"{"_rev":"\#(first)","v":2}"#)
        #expect(try server.json("GET", "/db/doc?rev=\(first)").json["v"] == 1)
        let compact = try server.json("POST", "/db/_compact", body: "")
        #expect(compact.status == 202)
        #expect(try server.json("POST", "/db/_compact", headers: [("Content-Type", "text/plain")], body: "").status == 415)
        var compacted = false
        for _ in 0..<100 where !compacted {
            compacted = try server.json("GET", "/db/doc?rev=\(first)").status == 404
            if !compacted { usleep(20_000) }
        }
        #expect(compacted)
        #expect(try server.json("GET", "/db/doc").json["v"] == 2)
        let info = try server.json("GET", "/db/doc?revs_info=true").json["_revs_info"]?.arrayValue
        #expect(info?.last?["status"]?.stringValue == "missing")
    }
}
