import CouchCore
import CouchReplication
import CouchServer
import CouchTestSupport
import Foundation
import Testing

/// The embedding application's Swift hook that rewrites bodies on push and on pull.
@Suite(.serialized) struct DocumentTransformTests {
    @Test func bodiesAreRewrittenOnPushAndPullKeepingTheirSpecialMembers() async throws {
        let (a, b) = (try TestServer(), try TestServer())
        defer { a.stop(); b.stop() }
        try await a.call("PUT", "/local")
        try await b.call("PUT", "/remote")
        try await a.call("PUT", "/local/plain", body: ["secret": "s", "n": 1])
        let attachment = try await offPool { try a.request("PUT", "/local/withfile/note.txt",
                                                            headers: [("Content-Type", "text/plain")], body: "hello") }
        #expect(attachment.status == 201)
        let transform = DocumentTransform { _, body, direction in
            var body = body
            body.removeValue(forKey: "secret")
            body["direction"] = JSONValue(direction == .push ? "push" : direction == .pull ? "pull" : "between")
            body["_id"] = "cannot-change"
            return body
        }

        var push = ReplicationSettings(source: try ReplicationPeer(json: "local", role: "source"),
                                       target: try ReplicationPeer(json: JSONValue(b.url + "/remote"), role: "target"))
        push.transform = transform
        guard case .completed = await (try await a.replications.start(push)).waitForOutcome() else {
            Issue.record("the push did not complete")
            return
        }
        let pushed = try await b.call("GET", "/remote/plain").json
        #expect(pushed["secret"] == nil)
        #expect(pushed["n"] == 1)
        #expect(pushed["direction"] == "push")
        #expect(pushed["_id"] == "plain")
        let withFile = try await b.call("GET", "/remote/withfile").json
        #expect(withFile["direction"] == "push")
        #expect(withFile["_attachments"]?["note.txt"]?["length"] == 5, "\(withFile.serializedString())")
        #expect(try await offPool { try b.request("GET", "/remote/withfile/note.txt") }.text == "hello")

        var pull = ReplicationSettings(source: try ReplicationPeer(json: JSONValue(b.url + "/remote"), role: "source"),
                                       target: try ReplicationPeer(json: "pulled", role: "target"))
        pull.createTarget = true
        pull.transform = transform
        guard case .completed = await (try await a.replications.start(pull)).waitForOutcome() else {
            Issue.record("the pull did not complete")
            return
        }
        #expect(try await a.call("GET", "/pulled/plain").json["direction"] == "pull")
    }
}

/// Transforms a replication names: a design document's JavaScript (`"transform": "ddoc/name"`)
/// or a Swift function registered by name, from `_replicator` documents and `_replicate`.
@Suite struct NamedTransformTests {
    static let design: JSONValue = ["transforms": [
        "redact": """
            function(doc, direction) {
              if (doc.refuse) { throw({error: "refused", reason: "not this one"}); }
              delete doc.secret;
              doc.via = direction;
              return doc;
            }
            """,
    ]]

    @Test func aDesignDocumentsTransformRewritesAPushAndSkipsWhatItRefuses() async throws {
        let (a, b) = (try TestServer(), try TestServer())
        defer { a.stop(); b.stop() }
        try await a.call("PUT", "/local")
        try await b.call("PUT", "/remote")
        #expect(try await a.call("PUT", "/local/_design/app", body: Self.design).status == 201)
        try await a.call("PUT", "/local/kept", body: ["name": "kept", "secret": "s3cret"])
        try await a.call("PUT", "/local/refused", body: ["refuse": true])
        #expect(try await a.call("PUT", "/_replicator/push", body: [
            "source": "local", "target": JSONValue(b.url + "/remote"), "transform": "app/redact",
        ]).status == 201)
        let done = try await poll { () async throws -> JSONValue? in
            let doc = try await a.call("GET", "/_replicator/push").json
            return doc["_replication_state"] == "completed" ? doc : JSONValue?.none
        }
        #expect(done?["_replication_stats"]?["doc_write_failures"] == 1, "\(done?.serializedString() ?? "")")
        let kept = try await b.call("GET", "/remote/kept").json
        #expect(kept["secret"] == nil && kept["via"] == "push" && kept["name"] == "kept")
        #expect(kept["_rev"] == (try await a.call("GET", "/local/kept").json["_rev"]), "the revision is kept")
        #expect(try await b.call("GET", "/remote/refused").status == 404)
        // The design document itself went through the transform too (its members are kept).
        #expect(try await b.call("GET", "/remote/_design/app").json["transforms"] != nil)
    }

    @Test func aRegisteredSwiftTransformRunsForReplicateAndAMissingOneFails() async throws {
        let a = try TestServer()
        defer { a.stop() }
        a.server.replications.registerTransform("upper", DocumentTransform { _, body, _ in
            var body = body
            if let name = body["name"]?.stringValue { body["name"] = JSONValue(name.uppercased()) }
            return body
        })
        try await a.call("PUT", "/source")
        try await a.call("PUT", "/source/d", body: ["name": "quiet"])
        let answer = try await a.call("POST", "/_replicate", body: [
            "source": "source", "target": "copy", "create_target": true, "transform": "upper",
        ])
        #expect(answer.status == 200, "\(answer.json.serializedString())")
        #expect(try await a.call("GET", "/copy/d").json["name"] == "QUIET")
        let missing = try await a.call("POST", "/_replicate", body: [
            "source": "source", "target": "copy2", "create_target": true, "transform": "nosuch/thing",
        ])
        #expect(missing.status == 404, "\(missing.json.serializedString())")
        #expect(try await a.call("POST", "/_replicate", body: ["source": "source", "target": "copy", "transform": 7]).status == 400)
    }
}
