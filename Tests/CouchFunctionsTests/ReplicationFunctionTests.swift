import CouchCore
import CouchServer
import CouchTestSupport
import Foundation
import Testing

/// Design-document functions in replication: named filters on local and remote sources,
/// and targets whose validation refuses some documents.
@Suite struct ReplicationFunctionTests {
    static let filtered: JSONValue = ["filters": ["by_type": "function(doc, req) { return doc.type == req.query.type; }"]]

    /// Source documents: a and c of type x (c deleted, keeping its type), b of type y.
    static func fillSource(_ server: TestServer) throws {
        try server.createDatabase("source")
        #expect(try server.json("PUT", "/source/_design/app", body: filtered.serializedString()).status == 201)
        try server.put("source", "a", #"{"type":"x"}"#)
        try server.put("source", "b", #"{"type":"y"}"#)
        let rev = try server.put("source", "c", #"{"type":"x"}"#)
        #expect(try server.json("PUT", "/source/c", body: #"{"_rev":"\#(rev)","_deleted":true,"type":"x"}"#).status == 201)
    }

    /// What arrived: ids with their deleted flag, from the target's changes.
    static func arrived(_ server: TestServer, _ database: String) throws -> [String: Bool] {
        let changes = try server.json("GET", "/\(database)/_changes").json
        var result: [String: Bool] = [:]
        for row in changes["results"]?.arrayValue ?? [] {
            if let id = row["id"]?.stringValue { result[id] = row["deleted"] == true }
        }
        return result
    }

    static func url(_ server: TestServer, _ database: String) -> JSONValue {
        JSONValue("http://127.0.0.1:\(server.port)/\(database)")
    }

    @Test func namedFilterWithQueryParametersInPushAndPull() throws {
        let (a, b) = (try TestServer(), try TestServer())
        defer { a.stop(); b.stop() }
        try Self.fillSource(a)
        let settings: (JSONValue, JSONValue) -> JSONValue = { source, target in
            ["source": source, "target": target, "create_target": true, "filter": "app/by_type", "query_params": ["type": "x"]]
        }
        // Push: a local source runs the filter itself.
        var (status, json) = try a.json("POST", "/_replicate", body: settings("source", Self.url(b, "pushed")).serializedString())
        #expect(status == 200, "\(json.serializedString())")
        #expect(try Self.arrived(b, "pushed") == ["a": false, "c": true])
        // Pull: the remote source runs it with query_params.
        (status, json) = try b.json("POST", "/_replicate", body: settings(Self.url(a, "source"), "pulled").serializedString())
        #expect(status == 200, "\(json.serializedString())")
        #expect(try Self.arrived(b, "pulled") == ["a": false, "c": true])
        let deleted = try b.json("GET", "/pulled/c?open_revs=all", headers: [("Accept", "application/json")]).json
        #expect(deleted.arrayValue?.first?["ok"]?["type"] == "x", "the deletion kept its fields: \(deleted.serializedString())")
        // Local to local.
        (status, json) = try a.json("POST", "/_replicate", body: settings("source", "copy").serializedString())
        #expect(status == 200, "\(json.serializedString())")
        #expect(try Self.arrived(a, "copy") == ["a": false, "c": true])
        // A missing filter fails the replication with CouchDB's reason.
        (status, json) = try a.json("POST", "/_replicate",
                                    body: (["source": "source", "target": "copy", "filter": "app/nosuch"] as JSONValue).serializedString())
        #expect(json["error"] != nil, "\(json.serializedString())")
    }

    @Test func documentsTheTargetsValidationRefusesAreCountedAndSkipped() throws {
        let (a, b) = (try TestServer(), try TestServer())
        defer { a.stop(); b.stop() }
        try a.createDatabase("source")
        for index in 0..<5 { try a.put("source", "doc\(index)", "{}") }
        try a.put("source", "secret1", #"{"secret":true}"#)
        try a.put("source", "secret2", #"{"secret":true}"#)
        let rule: JSONValue = ["validate_doc_update": "function(doc) { if (doc.secret) throw({forbidden: 'no secrets'}); }"]
        for database in ["pushed", "pulled"] {
            try b.createDatabase(database)
            #expect(try b.json("PUT", "/\(database)/_design/rules", body: rule.serializedString()).status == 201)
        }
        // Pushed into b by another Couchette (b's peer endpoints validate).
        var (_, json) = try a.json("POST", "/_replicate", body: (["source": "source", "target": Self.url(b, "pushed")] as JSONValue).serializedString())
        #expect(json["ok"] == true, "\(json.serializedString())")
        #expect(json["history"]?.arrayValue?.first?["docs_written"] == 5)
        #expect(json["history"]?.arrayValue?.first?["doc_write_failures"] == 2)
        // Pulled by b's own replicator into a local target (the store validates).
        (_, json) = try b.json("POST", "/_replicate", body: (["source": Self.url(a, "source"), "target": "pulled"] as JSONValue).serializedString())
        #expect(json["ok"] == true, "\(json.serializedString())")
        #expect(json["history"]?.arrayValue?.first?["docs_written"] == 5)
        #expect(json["history"]?.arrayValue?.first?["doc_write_failures"] == 2)
        for database in ["pushed", "pulled"] {
            #expect(Set(try Self.arrived(b, database).keys) == ["_design/rules", "doc0", "doc1", "doc2", "doc3", "doc4"])
        }
    }
}
