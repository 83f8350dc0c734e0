import CouchCore
import CouchFunctions
import CouchServer
import CouchStore
import CouchTestSupport
import Foundation
import Testing

/// An embedding application registers Swift functions by name; they behave as JavaScript
/// ones do on every path: HTTP writes, replicated writes, `_changes` and replication filters.
@Suite struct NativeFunctionTests {
    @Test func nativeValidationAndFilterBehaveAsJavaScriptOnes() throws {
        let server = try TestServer()
        defer { server.stop() }
        let functions = server.server.functions
        functions.registerValidation("no-drafts", database: try DatabaseName("db")) { arguments in
            if arguments.newDocument["draft"] == true { throw CouchError(.forbidden, "drafts stay local") }
            if arguments.newDocument["_deleted"] == true, arguments.oldDocument["locked"] == true {
                throw CouchError(.unauthorized, "locked by \(arguments.userContext["name"]?.stringValue ?? "nobody")")
            }
        }
        functions.registerFilter("app/published") { document, request in
            document["draft"] != true && document["lang"] == request["query"]?["lang"]
        }
        try server.createDatabase("db")
        try server.createDatabase("other")

        var (status, json) = try server.json("PUT", "/db/d", body: #"{"draft":true}"#)
        #expect(status == 403)
        #expect(json == ["error": "forbidden", "reason": "drafts stay local"])
        #expect(try server.json("PUT", "/other/d", body: #"{"draft":true}"#).status == 201, "registered for db only")
        let rev = try server.put("db", "locked", #"{"locked":true,"lang":"en"}"#)
        (status, json) = try server.json("DELETE", "/db/locked?rev=\(rev)")
        #expect(status == 401)
        #expect(json["reason"] == "locked by nobody")
        (status, json) = try server.json("POST", "/db/_bulk_docs",
                                         body: #"{"new_edits":false,"docs":[{"_id":"r","_rev":"1-a","draft":true}]}"#)
        #expect(json.arrayValue?.first?["error"] == "forbidden")

        try server.put("db", "en", #"{"lang":"en"}"#)
        try server.put("db", "fr", #"{"lang":"fr"}"#)
        try server.put("other", "en", #"{"lang":"en"}"#)
        let changes = try server.json("GET", "/db/_changes?filter=app/published&lang=en").json
        #expect(changes["results"]?.arrayValue?.compactMap { $0["id"]?.stringValue } == ["locked", "en"])
        let continuous = try server.request("GET", "/other/_changes?feed=continuous&timeout=0&filter=app/published&lang=en").text
        #expect(continuous.contains(#""id":"en""#))
        #expect(!continuous.contains(#""id":"d""#))

        // The replicator runs it on a local source.
        (status, json) = try server.json("POST", "/_replicate", body: #"""
            {"source":"db","target":"copy","create_target":true,"filter":"app/published","query_params":{"lang":"fr"}}
            """#)
        #expect(status == 200, "\(json.serializedString())")
        let copied = try server.json("GET", "/copy/_all_docs").json
        #expect(copied["rows"]?.arrayValue?.compactMap { $0["id"]?.stringValue } == ["fr"])
    }
}
