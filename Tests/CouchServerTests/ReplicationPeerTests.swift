import CouchCore
import CouchTestSupport
import Foundation
import Testing

/// Plays CouchDB's replicator against Couchette, step by step as its protocol
/// documentation describes, from one database to another.
@Suite struct ReplicationPeerTests {
    @Test func replicatorSideOfTheProtocolCopiesTreesAndConflicts() throws {
        let server = try TestServer()
        defer { server.stop() }
        try server.createDatabase("source")
        try server.createDatabase("target")
        var rev = try server.put("source", "edited", #"{"v":1}"#)
        rev = try server.put("source", "edited", #"{"_rev":"\#(rev)","v":2}"#)
        let gone = try server.put("source", "gone", "{}")
        _ = try server.json("DELETE", "/source/gone?rev=\(gone)")
        _ = try server.json("POST", "/source/_bulk_docs", body: #"""
            {"new_edits":false,"docs":[
              {"_id":"conflicted","_rev":"2-b","_revisions":{"start":2,"ids":["b","a"]},"side":"b"},
              {"_id":"conflicted","_rev":"2-c","_revisions":{"start":2,"ids":["c","a"]},"side":"c"}]}
            """#)
        for index in 0..<30 { _ = try server.put("source", "bulk\(index)", #"{"i":\#(index)}"#) }
        // The target already holds part of one history.
        _ = try server.json("POST", "/target/_bulk_docs", body: #"{"new_edits":false,"docs":[{"_id":"conflicted","_rev":"1-a"}]}"#)

        // 1-2. Peers answer with update_seq and a string instance_start_time.
        for database in ["source", "target"] {
            let info = try server.json("GET", "/\(database)").json
            #expect(info["update_seq"] != nil)
            #expect(info["instance_start_time"]?.stringValue != nil)
        }
        // 4. No checkpoint yet.
        #expect(try server.json("GET", "/target/_local/rep1").status == 404)

        // 6. The changes feed.
        let changes = try server.json("GET", "/source/_changes?style=all_docs&since=0&feed=normal").json
        let rows = try #require(changes["results"]?.arrayValue)
        var revsByID = JSONObject()
        for row in rows {
            revsByID[row["id"]!.stringValue!] = .array(row["changes"]!.arrayValue!.map { $0["rev"]! })
        }
        #expect(revsByID["conflicted"]?.arrayValue?.count == 2)

        // 7. What the target lacks.
        let diff = try server.json("POST", "/target/_revs_diff", body: JSONValue.object(revsByID).serializedString()).json
        #expect(diff.objectValue?.count == rows.count)
        #expect(diff["conflicted"]?["possible_ancestors"] == ["1-a"])

        // 8. Fetch with _bulk_get, and one document through open_revs multipart.
        var request: [JSONValue] = []
        for (id, missing) in diff.objectValue! {
            for revision in missing["missing"]!.arrayValue! { request.append(["id": JSONValue(id), "rev": revision]) }
        }
        let fetched = try server.json("POST", "/source/_bulk_get?revs=true&latest=true",
                                      body: JSONValue.object(["docs": .array(request)]).serializedString()).json
        var docs: [JSONValue] = []
        for result in try #require(fetched["results"]?.arrayValue) {
            for entry in result["docs"]!.arrayValue! { docs.append(try #require(entry["ok"])) }
        }
        #expect(docs.count == request.count)
        #expect(docs.allSatisfy { $0["_revisions"] != nil })

        let multipart = try server.request("GET", "/source/conflicted?revs=true&latest=true&open_revs=all",
                                           headers: [("Accept", "multipart/mixed")])
        let parts = try MultipartParts(multipart)
        #expect(parts.bodies.count == 2)
        #expect(parts.bodies.allSatisfy { (try? JSONValue.parse($0))?["_revisions"] != nil })

        // 9. Upload; the target never answers 409 to replicated revisions.
        let upload = try server.json("POST", "/target/_bulk_docs",
                                     body: JSONValue.object(["new_edits": false, "docs": .array(docs)]).serializedString())
        #expect(upload.status == 201)
        #expect(upload.json == [])

        // 11-12. Commit and checkpoint on both sides.
        let commit = try server.json("POST", "/target/_ensure_full_commit", body: "")
        #expect(commit.status == 201)
        #expect(try commit.json["instance_start_time"] == server.json("GET", "/target").json["instance_start_time"])
        let lastSeq = try #require(changes["last_seq"])
        let log = JSONValue.object([
            "session_id": "s1", "source_last_seq": lastSeq, "replication_id_version": 4,
            "history": [["session_id": "s1", "recorded_seq": lastSeq, "docs_written": JSONValue(docs.count)]],
        ])
        for database in ["source", "target"] {
            let saved = try server.json("PUT", "/\(database)/_local/rep1", body: log.serializedString())
            #expect(saved.status == 201)
            #expect(saved.json["rev"] == "0-1")
            #expect(try server.json("GET", "/\(database)/_local/rep1").json["history"]?[0]?["recorded_seq"] == lastSeq)
        }

        // Both sides now hold the same trees, winners and conflicts.
        #expect(try server.json("POST", "/target/_revs_diff", body: JSONValue.object(revsByID).serializedString()).json == [:])
        for id in revsByID.keys {
            let path = "/\(id)?open_revs=all&revs=true"
            let sourceLeaves = try Set(#require(try server.json("GET", "/source" + path).json.arrayValue))
            let targetLeaves = try Set(#require(try server.json("GET", "/target" + path).json.arrayValue))
            #expect(sourceLeaves == targetLeaves, "\(id)")
            #expect(try server.json("GET", "/source/\(id)?conflicts=true").json == server.json("GET", "/target/\(id)?conflicts=true").json)
        }
        let sourceInfo = try server.json("GET", "/source").json
        let targetInfo = try server.json("GET", "/target").json
        #expect(sourceInfo["doc_count"] == targetInfo["doc_count"])
        #expect(sourceInfo["doc_del_count"] == targetInfo["doc_del_count"])
    }

    @Test func peersProbeAndLimitsAnswerAsCouchDB() throws {
        let server = try TestServer()
        defer { server.stop() }
        try server.createDatabase("db")
        let probe = try server.request("GET", "/db/_bulk_get")
        #expect(probe.status == 405)
        #expect(probe.header("Allow") == "POST")
        let long = try server.request("GET", "/db/doc?open_revs=" + String(repeating: "x", count: 20_000))
        #expect(long.status == 414)
        #expect(try server.json("GET", "/db/_changes?unknown_parameter=1").status == 200)
        #expect(try server.json("POST", "/db/_missing_revs", body: #"{"a":["1-x"]}"#).json == ["missing_revs": ["a": ["1-x"]]])
    }

    @Test func bulkGetReportsMissingRevisionsPerDocument() throws {
        let server = try TestServer()
        defer { server.stop() }
        try server.createDatabase("db")
        let rev = try server.put("db", "here", #"{"x":1}"#)
        let result = try server.json("POST", "/db/_bulk_get",
                                     body: #"{"docs":[{"id":"here","rev":"\#(rev)"},{"id":"here","rev":"9-nope"},{"id":"absent"}]}"#).json
        let results = try #require(result["results"]?.arrayValue)
        #expect(results[0]["docs"]?[0]?["ok"]?["x"] == 1)
        #expect(results[1]["docs"]?[0]?["error"]?["error"] == "not_found")
        #expect(results[1]["docs"]?[0]?["error"]?["rev"] == "9-nope")
        #expect(results[2]["docs"]?[0]?["error"]?["id"] == "absent")
        let mixed = try server.request("POST", "/db/_bulk_get?revs=true", headers: [("Accept", "multipart/mixed")],
                                       body: #"{"docs":[{"id":"here"},{"id":"absent"}]}"#)
        let parts = try MultipartParts(mixed)
        #expect(parts.bodies.count == 2)
        #expect(parts.headers[1].contains("error=\"true\""))
    }
}

/// Splits a multipart response into its parts' headers and bodies.
struct MultipartParts {
    var headers: [String] = []
    var bodies: [String] = []

    init(_ response: HTTPTestResponse) throws {
        let contentType = try #require(response.header("Content-Type"))
        let boundary = try #require(contentType.components(separatedBy: "boundary=\"").last?.dropLast())
        let text = response.text
        for chunk in text.components(separatedBy: "--\(boundary)").dropFirst() where !chunk.hasPrefix("--") {
            let pieces = chunk.components(separatedBy: "\r\n\r\n")
            headers.append(pieces[0])
            var body = pieces.dropFirst().joined(separator: "\r\n\r\n")
            if body.hasSuffix("\r\n") { body.removeLast() }
            bodies.append(body)
        }
    }
}
