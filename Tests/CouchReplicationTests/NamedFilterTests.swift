import CouchCore
import CouchReplication
import CouchTestSupport
import Foundation
import Testing

/// A named filter runs on the source, which receives it exactly as CouchDB's replicator
/// sends it; its code and parameters are part of the replication ID. The source here is a
/// tiny recording server playing a CouchDB with one filtered change.
@Suite(.serialized) struct NamedFilterTests {
    static let filterCode = "function(doc, req) { return doc.type === req.query.type; }"

    func makeSource() throws -> LoopbackHTTPServer {
        try LoopbackHTTPServer { request in
            switch (request.method, request.path) {
            case ("GET", "/src"), ("GET", "/src/"):
                return .respond(.json(200, ["db_name": "src", "update_seq": "7-g1AAAA", "instance_start_time": "0"]))
            case ("GET", "/src/_design/app"):
                return .respond(.json(200, ["_id": "_design/app", "_rev": "1-a", "filters": ["by_type": JSONValue(Self.filterCode)]]))
            case ("GET", "/src/_changes"):
                return .respond(LoopbackHTTPServer.Response(status: 200, headers: [("Content-Type", "application/json")], body: Array("""
                    {"results":[
                    {"seq":"7-g1AAAA","id":"kept","changes":[{"rev":"1-abc"}]}
                    ],
                    "last_seq":"7-g1AAAA","pending":0}

                    """.utf8)))
            case ("POST", "/src/_bulk_get"):
                return .respond(.json(200, ["results": [["id": "kept", "docs": [["ok": [
                    "_id": "kept", "_rev": "1-abc", "type": "x y", "_revisions": ["start": 1, "ids": ["abc"]]]]]]]]))
            case ("POST", "/src/_ensure_full_commit"):
                return .respond(.json(201, ["ok": true, "instance_start_time": "0"]))
            case ("GET", _) where request.path.hasPrefix("/src/_local/"):
                return .respond(.json(404, ["error": "not_found", "reason": "missing"]))
            case ("PUT", _) where request.path.hasPrefix("/src/_local/"):
                return .respond(.json(201, ["ok": true, "id": JSONValue(String(request.path.dropFirst(5))), "rev": "0-1"]))
            default:
                return .respond(.json(404, ["error": "not_found", "reason": "missing"]))
            }
        }
    }

    @Test func theFilterAndItsParametersGoToTheSourceAsCouchDBSendsThem() async throws {
        let source = try makeSource()
        let a = try TestServer()
        defer { source.stop(); a.stop() }
        try await a.call("PUT", "/target")
        let body: JSONValue = ["source": JSONValue(source.url + "/src"), "target": "target", "filter": "app/by_type",
                               "query_params": ["type": "x y", "limit": 2, "feed": "ignored"]]
        let result = try await a.replicate(body).json
        #expect(result["ok"] == true, "\(result.serializedString())")
        #expect(result["source_last_seq"] == "7-g1AAAA")
        #expect(try await a.call("GET", "/target/kept").json["type"] == "x y")

        let changes = try #require(source.requests.first { $0.path == "/src/_changes" })
        #expect(changes.method == "GET")
        // CouchDB: `filter` first, then the parameters (last first, skipping any the
        // replicator sets itself), then feed, style, since and timeout; values encoded as
        // mochiweb's quote_plus does.
        #expect(changes.rawQuery == "filter=app%2Fby_type&limit=2&type=x+y&feed=normal&style=all_docs&since=0&timeout=10000")
        // The design document was read for the filter's code (part of the replication ID).
        #expect(source.requests.contains { $0.path == "/src/_design/app" })
        // The checkpoint was written on the source with the opaque sequence as given.
        let checkpoint = try #require(source.requests.first { $0.method == "PUT" && $0.path.hasPrefix("/src/_local/") })
        #expect(checkpoint.json?["source_last_seq"] == "7-g1AAAA")
    }

    @Test func theParametersArePartOfTheReplicationID() async throws {
        let source = try makeSource()
        let a = try TestServer()
        defer { source.stop(); a.stop() }
        try await a.call("PUT", "/target")
        func checkpointPaths() -> Set<String> {
            Set(source.requests.filter { $0.method == "GET" && $0.path.hasPrefix("/src/_local/") }.map(\.path))
        }
        _ = try await a.replicate(["source": JSONValue(source.url + "/src"), "target": "target", "filter": "app/by_type",
                                   "query_params": ["type": "a"]])
        let first = checkpointPaths()
        _ = try await a.replicate(["source": JSONValue(source.url + "/src"), "target": "target", "filter": "app/by_type",
                                   "query_params": ["type": "a"]])
        #expect(checkpointPaths() == first, "the same replication finds the same checkpoint")
        _ = try await a.replicate(["source": JSONValue(source.url + "/src"), "target": "target", "filter": "app/by_type",
                                   "query_params": ["type": "b"]])
        #expect(checkpointPaths().count == 2, "other parameters, another replication")
        // The manager computes the same IDs.
        let settings = try ReplicationSettings(json: ["source": JSONValue(source.url + "/src"), "target": "target",
                                                      "filter": "app/by_type", "query_params": ["type": "b"]])
        let id = try await a.replications.replicationID(for: settings)
        #expect(checkpointPaths().contains("/src/_local/" + id.baseID))
        #expect(id == ReplicationID(settings: settings, serverUUID: a.databases.serverUUID, filterCode: Self.filterCode))
    }
}
