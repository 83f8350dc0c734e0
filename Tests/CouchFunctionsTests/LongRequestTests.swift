import CouchCore
import CouchServer
import CouchTestSupport
import Foundation
import Testing

/// Requests that may run long (design functions, index builds, writes that validation
/// functions judge) are answered off the listener's threads: with a single listener thread, a
/// show function, a view's map function or a validation function that loops holds no other
/// connection up.
@Suite struct LongRequestTests {
    private static func serverWithOneListenerThread() throws -> TestServer {
        var configuration = ServerConfiguration.testing()
        // Long enough that the requests made meanwhile come back first on a loaded machine.
        configuration.functions.timeout = 10
        let server = try TestServer(configuration: configuration) { $0.threadCount = 1 }
        try server.createDatabase("db")
        try server.createDatabase("other")
        let design: JSONValue = [
            "shows": ["loop": "function(doc, req) { while (true) {} }"],
            "views": ["loop": ["map": "function(doc) { while (true) {} }"]],
            "validate_doc_update": "function(doc) { if (doc.loop) { while (true) {} } }",
        ]
        #expect(try server.json("PUT", "/db/_design/app", body: design.serializedString()).status == 201)
        #expect(try server.json("PUT", "/db/doc", body: #"{"a":1}"#).status == 201)
        return server
    }

    /// Sends the looping request, checks that other requests are answered while it runs,
    /// and that it ends as a function stopped at its time limit does (`os_process_error`;
    /// CouchDB's query server fails a timed-out map function's query the same way).
    private static func expectOthersAnswered(while method: String, _ path: String, body: String? = nil,
                                             on server: TestServer, _ comment: Comment) throws {
        let slow = Background { try server.json(method, path, body: body) }
        Thread.sleep(forTimeInterval: 0.2)
        #expect(answeredWhile(slow, [
            { try server.request("GET", "/").status == 200 },
            { try server.json("GET", "/db/doc").status == 200 },
            // (Into another database: the view would map a document written into its own.)
            { try server.json("PUT", "/other/doc-\(UUID().uuidString)", body: "{}").status == 201 },
        ], copies: 1), comment)
        let (status, json) = try slow.value()
        #expect(status == 500)
        #expect(json["error"] == "os_process_error", "\(json.serializedString())")
    }

    @Test func aLoopingShowFunctionHoldsNoOtherConnection() throws {
        let server = try Self.serverWithOneListenerThread()
        defer { server.stop() }
        try Self.expectOthersAnswered(while: "GET", "/db/_design/app/_show/loop/doc", on: server,
                                      "answered while the show function runs")
    }

    @Test func aViewBuildingOnItsFirstQueryHoldsNoOtherConnection() throws {
        let server = try Self.serverWithOneListenerThread()
        defer { server.stop() }
        try Self.expectOthersAnswered(while: "GET", "/db/_design/app/_view/loop", on: server, "answered while the view builds")
    }

    @Test func aLoopingValidationFunctionHoldsNoOtherConnection() throws {
        let server = try Self.serverWithOneListenerThread()
        defer { server.stop() }
        try Self.expectOthersAnswered(while: "PUT", "/db/slow", body: #"{"loop":true}"#, on: server,
                                      "answered while the validation function runs")
        #expect(try server.json("GET", "/db/slow").status == 404, "the refused write left nothing")
    }
}
