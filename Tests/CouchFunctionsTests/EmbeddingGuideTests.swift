import CouchCore
import CouchFunctions
import CouchReplication
import CouchServer
import CouchStore
import CouchTestSupport
import Foundation
import Testing

/// The program docs/embedding.md shows, run as shown (keep the two in step): the store, a
/// listener, native functions and an in-process replication with a registered transform,
/// through the public API only.
@Suite struct EmbeddingGuideTests {
    @Test func theEmbeddingGuidesProgramWorks() async throws {
        let directory = TestServer.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }

        // The store.
        let databases = try DatabaseManager(directory: directory)
        let name = try DatabaseName("notes")
        let notes = databases.exists(name) ? try databases.database(name) : try databases.create(name)
        let first = try notes.update(DocumentEdit(id: DocumentID("first"), body: ["type": "note", "text": "hello"]))
        let second = try notes.update(DocumentEdit(id: DocumentID("first"), revision: first,
                                                   body: ["type": "note", "text": "hello again"]))
        let current = try notes.document(DocumentID("first"))
        #expect(current.revision.revision == second)
        #expect(String(decoding: current.revision.body, as: UTF8.self).contains("hello again"))
        do {
            _ = try notes.update(DocumentEdit(id: DocumentID("first"), revision: first, body: ["type": "note"]))
            Issue.record("a stale revision was accepted")
        } catch let error as CouchError {
            #expect(error.kind == .conflict)
        }

        // Serving HTTP.
        let server = try CouchServer(databases: databases)
        var listening = ListenerConfiguration()
        listening.port = 0
        let listener = Listener(configuration: listening, handler: server)
        try listener.start()
        defer {
            server.shutdown()
            listener.drain()
            listener.stop()
        }
        #expect(listener.port > 0)
        let read = try httpRequest(port: listener.port, "GET", "/notes/first")
        #expect(read.status == 200)
        #expect(try JSONValue.parse(read.body)["text"] == "hello again")

        // Native functions.
        server.functions.registerValidation("typed", database: try DatabaseName("notes")) { arguments in
            if arguments.newDocument["_deleted"] != true, arguments.newDocument["type"] == nil {
                throw CouchError(.forbidden, "type is required")
            }
        }
        server.functions.registerFilter("app/mine") { document, request in
            document["owner"] == request["userCtx"]?["name"]
        }
        let refused = try httpRequest(port: listener.port, "PUT", "/notes/untyped", body: Array(#"{"text":"x"}"#.utf8))
        #expect(refused.status == 403)
        #expect(try JSONValue.parse(refused.body)["reason"] == "type is required")
        #expect(server.functions.hasNativeFilter("app/mine", database: name))

        // Replicating in-process, with a registered transform.
        server.replications.registerTransform("stamp", DocumentTransform { id, body, direction in
            var body = body
            body["copied"] = JSONValue(direction.rawValue)
            return body
        })
        let settings = try ReplicationSettings(json: [
            "source": "notes", "target": "archive", "create_target": true, "transform": "stamp",
        ])
        let replication = try await server.replications.start(settings)
        switch await replication.waitForOutcome() {
        case .completed(let log): #expect(JSONValue.object(log).serializedString().contains("docs_written"))
        case .failed(let error): Issue.record("replication failed: \(error)")
        case .cancelled: Issue.record("replication cancelled")
        }
        let copied = try databases.database(try DatabaseName("archive")).document(DocumentID("first"))
        #expect(try JSONValue.parse(copied.revision.body)["copied"] == "between")
    }
}
