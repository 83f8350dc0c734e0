import CouchCore
import CouchServer
import CouchTestSupport
import Testing

/// Design documents in Erlang are kept but not run: Couchette has no Erlang query server, and
/// answers their views and filters as a CouchDB without one does.
@Suite struct ErlangDesignDocumentTests {
    @Test func viewsAndFiltersAnswerUnknownQueryLanguage() throws {
        let server = try TestServer()
        defer { server.stop() }
        try server.createDatabase("db")
        let design = #"{"language":"erlang","views":{"v":{"map":"fun({Doc}) -> Emit(1, null) end."}},"filters":{"f":"fun({Doc}, Req) -> true end."}}"#
        #expect(try server.json("PUT", "/db/_design/erl", body: design).status == 201)
        let expected: JSONValue = ["error": "unknown_query_language", "reason": "erlang"]
        for path in ["/db/_design/erl/_view/v", "/db/_changes?filter=erl/f", "/db/_changes?filter=_view&view=erl/v"] {
            let (status, json) = try server.json("GET", path)
            #expect(status == 500 && json == expected, "\(path): \(json)")
        }
        // Names the document does not hold are still CouchDB's 404s.
        #expect(try server.json("GET", "/db/_design/erl/_view/nothing").status == 404)
        #expect(try server.json("GET", "/db/_changes?filter=erl/nothing").status == 404)
    }
}
