import CouchCore
import CouchServer
import CouchTestSupport
import Foundation
import Testing

/// Statuses and error texts as CouchDB 3.4 answers them where they used to differ.
@Suite struct CouchDBAnswersTests {
    @Test func statusCodes() throws {
        let server = try TestServer()
        defer { server.stop() }
        try server.createDatabase("db")
        let rev = try server.put("db", "doc", #"{"_attachments":{"a.txt":{"content_type":"text/plain","data":"aGk="}}}"#)
        // A removed attachment answers 200 whatever quorum `w` asks (a write asking w=3 answers 202).
        #expect(try server.request("DELETE", "/db/doc/a.txt?w=3&rev=\(rev)").status == 200)
        #expect(try server.request("PUT", "/db/other?w=3", body: "{}").status == 202)
        let temporary = try server.json("POST", "/db/_temp_view", body: #"{"map":"function(doc){emit(null)}"}"#)
        #expect(temporary.status == 410)
        #expect(temporary.json == ["error": "gone", "reason": "Temporary views are not supported in CouchDB"])
        // `POST _all_docs` (and `_design_docs`, `_local_docs`) take JSON only, as CouchDB's `validate_ctype`.
        for path in ["/db/_all_docs", "/db/_design_docs", "/db/_local_docs"] {
            let form = try server.json("POST", path, headers: [("Content-Type", "application/x-www-form-urlencoded")],
                                       body: #"{"keys":["doc"]}"#)
            #expect(form.status == 415)
            #expect(form.json["reason"] == "Content-Type must be application/json")
        }
    }

    @Test func errorTexts() throws {
        let server = try TestServer()
        defer { server.stop() }
        try server.createDatabase("db")
        #expect(try server.json("POST", "/db", body: #"{"_id":1}"#).json
                == ["error": "illegal_docid", "reason": "Document id must be a string"])
        for path in ["/db/_local", "/db/_local/", "/db/_local%2F"] {
            #expect(try server.json("PUT", path, body: "{}").json == ["error": "bad_request", "reason": "Invalid _local document id."])
        }
        #expect(try server.json("PUT", "/db/_local/foo/bar", body: "{}").json["reason"] == "_local documents do not accept attachments.")
        #expect(try server.json("PUT", "/db/_local/foo", body: "{}").status == 201)
        let rev = try server.put("db", "doc", "{}")
        let etag = try server.json("PUT", "/db/doc", headers: [("If-Match", "1-foobar")], body: #"{"_rev":"\#(rev)"}"#)
        #expect(etag.json == ["error": "bad_request", "reason": "Document rev and etag have different values"])
        let query = try server.json("PUT", "/db/doc?rev=1-foobar", body: #"{"_rev":"\#(rev)"}"#)
        #expect(query.json["reason"] == "Document rev from request body and query string have different values")
        #expect(try server.json("PUT", "/db/doc", headers: [("If-Match", "\"\(rev)\"")], body: "{}").status == 201)
    }
}
