import CouchCore
import CouchServer
import CouchTestSupport
import Foundation
import Testing

/// Update and rewrite functions act with their caller's rights, and only members reach them;
/// functions cannot compile code at run time.
@Suite struct DesignFunctionSecurityTests {
    static let ddoc: JSONValue = [
        "shows": ["who": "function(doc, req) { return doc ? doc.name : 'none'; }"],
        "updates": [
            "evil": "function(doc, req) { return [{_id: '_design/evil', validate_doc_update: 'function() {}'}, 'written']; }",
            "note": "function(doc, req) { return [{_id: 'note-' + req.userCtx.name}, 'noted']; }",
        ],
        "rewrites": [["from": "users/*", "to": "../../../_users/*"]],
    ]

    @Test func writesAndRewritesFollowTheCallersRights() throws {
        let fixture = try SecuredServer()
        let admin = fixture.admin
        #expect(try fixture.server.json("PUT", "/secured/_design/look", headers: [admin], body: Self.ddoc.serializedString()).status == 201)
        // Outsiders do not reach the functions at all.
        #expect(try fixture.attempt("outsider", "GET", "/secured/_design/look/_show/who").status == 403)
        #expect(try fixture.attempt("anonymous", "POST", "/secured/_design/look/_update/note").status == 401)
        // A member's update writes as that member: documents yes, design documents no.
        #expect(try fixture.attempt("member", "POST", "/secured/_design/look/_update/note").status == 201)
        let refused = try fixture.attempt("member", "POST", "/secured/_design/look/_update/evil")
        #expect(refused.status == 403)
        #expect(try fixture.server.request("GET", "/secured/_design/evil", headers: [admin]).status == 404)
        #expect(try fixture.attempt("dbadmin", "POST", "/secured/_design/look/_update/evil").status == 201)
        // A rewrite's target is authorized again (here: `_users` documents of others).
        try fixture.server.json("PUT", "/_node/_local/_config/httpd/secure_rewrites", headers: [admin], body: #""false""#)
        let leaked = try fixture.attempt("member", "GET", "/secured/_design/look/_rewrite/users/org.couchdb.user:dbadmin")
        #expect(leaked.status == 404)
        #expect(try fixture.attempt("member", "GET", "/secured/_design/look/_rewrite/users/org.couchdb.user:member").status == 200)
    }

    /// CouchDB's couchjs refuses eval() and the Function constructor (unless started with
    /// `--eval`): a map function that tries emits nothing, a show that tries fails.
    @Test func runtimeCodeEvaluationIsRefused() throws {
        let server = try TestServer()
        defer { server.stop() }
        try server.createDatabase("db")
        try server.put("db", "doc", "{}")
        let ddoc: JSONValue = [
            "views": [
                "constructor": ["map": "function(doc) { var glob = emit.constructor('return this')(); emit(doc._id, null); }"],
                "plain": ["map": "function(doc) { emit(doc._id, null); }"],
            ],
            "shows": ["eval": "function(doc, req) { return String(eval('1 + 1')); }"],
        ]
        #expect(try server.json("PUT", "/db/_design/sandbox", body: ddoc.serializedString()).status == 201)
        #expect(try server.json("GET", "/db/_design/sandbox/_view/constructor").json["total_rows"] == 0)
        #expect(try server.json("GET", "/db/_design/sandbox/_view/plain").json["total_rows"] == 1)
        let (status, json) = try server.json("GET", "/db/_design/sandbox/_show/eval")
        #expect(status == 500)
        #expect(json["error"] == "render_error")
        #expect(json["reason"]?.stringValue?.contains("EvalError") == true)
    }
}
