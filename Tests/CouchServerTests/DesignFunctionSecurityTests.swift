import CouchCore
import CouchServer
import CouchTestSupport
import Foundation
import Testing

/// Update and rewrite functions act with their caller's rights, and only members reach them.
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
}
