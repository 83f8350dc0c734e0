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
