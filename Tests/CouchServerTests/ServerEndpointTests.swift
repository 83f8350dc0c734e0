import CouchCore
import CouchTestSupport
import Foundation
import Testing

/// `_membership`, `_dbs_info`, `_db_updates` and the CouchDB 1 leftovers at the root.
@Suite struct ServerEndpointTests {
    @Test func membershipNamesTheNode() throws {
        let server = try TestServer()
        defer { server.stop() }
        let (status, body) = try server.json("GET", "/_membership")
        #expect(status == 200)
        #expect(body["all_nodes"] == ["couchette@127.0.0.1"])
        #expect(body["cluster_nodes"] == ["couchette@127.0.0.1"])
    }

    @Test func databasesInfoListsAndLooksUp() throws {
        let server = try TestServer()
        defer { server.stop() }
        for name in ["alpha", "bravo", "charlie"] { try server.createDatabase(name) }
        try server.put("bravo", "doc", #"{"a":1}"#)
        // The server's own `_replicator` comes first.
        let all = try #require(try server.json("GET", "/_dbs_info?startkey=%22a%22").json.arrayValue)
        #expect(all.map { $0["key"]?.stringValue } == ["alpha", "bravo", "charlie"])
        #expect(all[1]["info"]?["doc_count"] == 1)
        #expect(all[1]["info"]?["db_name"] == "bravo")
        #expect(sequenceNumber(all[1]["info"]?["update_seq"]) == 1)
        let page = try #require(try server.json("GET", "/_dbs_info?descending=true&skip=1&limit=1").json.arrayValue)
        #expect(page.map { $0["key"]?.stringValue } == ["bravo"])
        let range = try #require(try server.json("GET", "/_dbs_info?startkey=%22b%22&endkey=%22c%22").json.arrayValue)
        #expect(range.map { $0["key"]?.stringValue } == ["bravo"])

        let (status, keyed) = try server.json("POST", "/_dbs_info", body: #"{"keys":["charlie","missing","bravo"]}"#)
        #expect(status == 200)
        let rows = try #require(keyed.arrayValue)
        #expect(rows.map { $0["key"]?.stringValue } == ["charlie", "missing", "bravo"])
        #expect(rows[0]["info"]?["doc_count"] == 0)
        #expect(rows[1]["error"] == "not_found")
        #expect(rows[1]["info"] == nil)
        #expect(rows[2]["info"]?["doc_count"] == 1)

        let missingKeys = try server.json("POST", "/_dbs_info", body: #"{"names":[]}"#)
        #expect(missingKeys.status == 400)
        #expect(missingKeys.json["reason"] == "`keys` member must exist.")
        let tooMany = "[" + (0...100).map { "\"d\($0)\"" }.joined(separator: ",") + "]"
        #expect(try server.json("POST", "/_dbs_info", body: #"{"keys":\#(tooMany)}"#).json["reason"] == "too_many_keys")
        #expect(try server.request("DELETE", "/_dbs_info").header("Allow") == "GET,HEAD,POST")
    }

    @Test func serverEndpointsAreForServerAdmins() throws {
        let fixture = try SecuredServer()
        for path in ["/_membership", "/_dbs_info", "/_db_updates", "/_stats", "/_config", "/_node/_local"] {
            let anonymous = try fixture.attempt("anonymous", "GET", path)
            #expect(anonymous.status == 401, "\(path)")
            #expect(anonymous.error == "unauthorized", "\(path)")
            #expect(try fixture.attempt("outsider", "GET", path).status == 401, "\(path)")
        }
        #expect(try fixture.attempt("admin", "GET", "/_membership").status == 200)
        // CouchDB 3 has neither `/_stats` nor `/_config` at the root: an admin is told so.
        for path in ["/_stats", "/_config"] {
            let admin = try fixture.attempt("admin", "GET", path)
            #expect(admin.status == 400, "\(path)")
            #expect(admin.error == "illegal_database_name", "\(path)")
        }
    }

    // MARK: _db_updates

    private func rows(_ body: JSONValue) -> [String] {
        (body["results"]?.arrayValue ?? []).map { "\($0["type"]?.stringValue ?? "?"):\($0["db_name"]?.stringValue ?? "?")" }
    }

    @Test func databaseUpdatesNormalFeedSeesCreateUpdateDelete() throws {
        let server = try TestServer()
        defer { server.stop() }
        let start = try server.json("GET", "/_db_updates").json
        let since = try #require(start["last_seq"]?.stringValue)
        try server.createDatabase("one")
        try server.put("one", "a", "{}")
        try server.createDatabase("two")
        #expect(try server.request("DELETE", "/two").status == 200)
        let (status, body) = try server.json("GET", "/_db_updates?since=\(since)")
        #expect(status == 200)
        #expect(rows(body) == ["created:one", "updated:one", "created:two", "deleted:two"])
        let sequences = (body["results"]?.arrayValue ?? []).compactMap { sequenceNumber($0["seq"]) }
        #expect(sequences.count == 4)
        #expect(sequences == sequences.sorted())
        #expect(sequenceNumber(body["last_seq"]) == sequences.last)

        // One row per event type and database, at its latest sequence.
        try server.put("one", "b", "{}")
        let again = try server.json("GET", "/_db_updates?since=\(since)").json
        #expect(rows(again) == ["created:one", "created:two", "deleted:two", "updated:one"])
        let lastSeq = try #require(again["last_seq"]?.stringValue)
        #expect(rows(try server.json("GET", "/_db_updates?since=\(lastSeq)").json) == [])
        #expect(rows(try server.json("GET", "/_db_updates?since=\(since)&limit=2").json) == ["created:one", "created:two"])
        let descending = try server.json("GET", "/_db_updates?descending=true&limit=2").json
        #expect(rows(descending) == ["updated:one", "deleted:two"])
        #expect(try server.json("GET", "/_db_updates?limit=-1").json["reason"] == "invalid_integer")
        #expect(try server.json("GET", "/_db_updates?feed=weekly").status == 400)
    }

    @Test func databaseUpdatesSurviveARestart() throws {
        let server = try TestServer()
        try server.createDatabase("kept")
        try server.put("kept", "doc", "{}")  // its `updated` event waits to be written in a batch
        server.stop(keepData: true)
        let restarted = try TestServer(directory: server.directory)
        defer { restarted.stop() }
        let events = rows(try restarted.json("GET", "/_db_updates").json)
        #expect(events.contains("created:kept") && events.contains("updated:kept"))
    }

    @Test func databaseUpdatesLongpollWaitsForTheNextEvent() throws {
        let server = try TestServer()
        defer { server.stop() }
        let connection = try HTTPTestConnection(port: server.port)
        defer { connection.close() }
        #expect(try connection.startStreaming("GET", "/_db_updates?feed=longpoll&since=now").status == 200)
        Thread.sleep(forTimeInterval: 0.2)
        try server.createDatabase("late")
        let body = try JSONValue.parse(connection.readToEnd(timeout: 5))
        #expect(rows(body) == ["created:late"])
        let timedOut = try server.json("GET", "/_db_updates?feed=longpoll&since=now&timeout=100").json
        #expect(rows(timedOut) == [])
        #expect(sequenceNumber(timedOut["last_seq"]) == sequenceNumber(body["last_seq"]))
    }

    @Test func databaseUpdatesContinuousAndEventSourceFeeds() throws {
        let server = try TestServer()
        defer { server.stop() }
        let since = try #require(try server.json("GET", "/_db_updates").json["last_seq"]?.stringValue)
        try server.createDatabase("first")
        let connection = try HTTPTestConnection(port: server.port)
        defer { connection.close() }
        #expect(try connection.startStreaming("GET", "/_db_updates?feed=continuous&heartbeat=100&since=\(since)").status == 200)
        let first = try JSONValue.parse(try #require(try connection.readLine(timeout: 5)))
        #expect(first["type"] == "created" && first["db_name"] == "first")
        #expect(try connection.readLine(timeout: 5) == "")  // a heartbeat
        try server.put("first", "doc", "{}")
        var line = try connection.readLine(timeout: 5)
        while line == "" { line = try connection.readLine(timeout: 5) }
        let update = try JSONValue.parse(try #require(line))
        #expect(update["type"] == "updated" && update["db_name"] == "first")

        let timed = try server.request("GET", "/_db_updates?feed=continuous&timeout=0&since=\(since)")
        let lines = timed.text.split(separator: "\n")
        #expect(lines.count == 3)
        #expect(sequenceNumber(try JSONValue.parse(String(lines[2]))["last_seq"]) == sequenceNumber(update["seq"]))

        let events = try server.request("GET", "/_db_updates?feed=eventsource&timeout=0&since=\(since)")
        #expect(events.header("Content-Type") == "text/event-stream")
        let text = events.text
        #expect(text.hasPrefix("data: {"))
        let id = try #require(text.split(separator: "\n").first { $0.hasPrefix("id: ") })
        #expect(sequenceNumber(try JSONValue.parse(String(id.dropFirst(4)))) != nil)
    }
}
