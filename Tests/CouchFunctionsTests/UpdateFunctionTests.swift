import CouchCore
import CouchServer
import CouchTestSupport
import Foundation
import Testing

/// `_update` over real HTTP, after CouchDB's own update tests: `[doc, response]` written
/// through the ordinary write path (validation, conflicts), with and without a document.
@Suite struct UpdateFunctionTests {
    static let updates: JSONValue = [
        "hello": #"""
            function(doc, req) {
              if (!doc) {
                if (req.id) { return [{_id: req.id, created: true}, "<p>New World</p>"]; }
                return [null, "<p>Empty World</p>"];
              }
              doc.world = "hello";
              doc.edited_by = req.userCtx.name;
              return [doc, "<p>hello doc</p>"];
            }
            """#,
        "in-place": #"""
            function(doc, req) {
              doc[req.query.field] = req.query.value;
              return [doc, "set " + req.query.field + " to " + req.query.value];
            }
            """#,
        "form": #"""
            function(doc, req) {
              for (var field in req.form) { doc[field] = req.form[field]; }
              return [doc, "updated doc from form"];
            }
            """#,
        "bump": "function(doc, req) { doc.counter = (doc.counter || 0) + 1; return [doc, {code: 302, body: 'bumped'}]; }",
        "uuid-doc": "function(doc, req) { return [{_id: req.uuid, made: true}, {json: {id: req.uuid}}]; }",
        "get-uuid": "function(doc, req) { return [null, req.uuid]; }",
        "empty-id": "function(doc, req) { return [{}, 'oops']; }",
        "stale": "function(doc, req) { return [{_id: doc._id, _rev: '1-00000000000000000000000000000000'}, 'stale']; }",
        "no-response": "function(doc, req) { return [doc]; }",
        "binary": "function(doc, req) { return [null, {headers: {'Content-Type': 'application/octet-stream'}, base64: 'aGVsbG8='}]; }",
    ]

    static func server() throws -> TestServer {
        let server = try TestServer()
        try server.createDatabase("db")
        let ddoc: JSONValue = [
            "updates": updates,
            "validate_doc_update": "function(newDoc) { if (newDoc.forbidden) throw({forbidden: 'no forbidden documents'}); }",
        ]
        #expect(try server.json("PUT", "/db/_design/update", body: ddoc.serializedString()).status == 201)
        try server.put("db", "rusty", #"{"word":"plankton","name":"Rusty"}"#)
        return server
    }

    @Test func updatesAnExistingDocument() throws {
        let server = try Self.server()
        defer { server.stop() }
        let response = try server.request("PUT", "/db/_design/update/_update/hello/rusty")
        #expect(response.status == 201)
        #expect(response.text == "<p>hello doc</p>")
        #expect(response.header("Content-Type") == "text/html; charset=utf-8")
        #expect(response.header("X-Couch-Id") == "rusty")
        let doc = try server.json("GET", "/db/rusty").json
        #expect(doc["world"] == "hello")
        #expect(doc["name"] == "Rusty")
        #expect(doc["_rev"]?.stringValue == response.header("X-Couch-Update-NewRev"))
        #expect(doc["_rev"]?.stringValue?.hasPrefix("2-") == true)

        let placed = try server.request("POST", "/db/_design/update/_update/in-place/rusty?field=title&value=test")
        #expect(placed.status == 201)
        #expect(placed.text == "set title to test")
        #expect(try server.json("GET", "/db/rusty").json["title"] == "test")

        let form = try server.request("PUT", "/db/_design/update/_update/form/rusty",
                                      headers: [("Content-Type", "application/x-www-form-urlencoded")], body: "formfoo=bar&formbar=a+b")
        #expect(form.status == 201)
        let formed = try server.json("GET", "/db/rusty").json
        #expect(formed["formfoo"] == "bar")
        #expect(formed["formbar"] == "a b")

        // The function's own code wins over 201.
        let bumped = try server.request("PUT", "/db/_design/update/_update/bump/rusty")
        #expect(bumped.status == 302)
        #expect(bumped.text == "bumped")
        #expect(try server.json("GET", "/db/rusty").json["counter"] == 1)

        // IDs with slashes.
        try server.put("db", "with%2Fslash", #"{"counter":1}"#)
        #expect(try server.request("PUT", "/db/_design/update/_update/bump/with/slash").status == 302)
        #expect(try server.json("GET", "/db/with%2Fslash").json["counter"] == 2)
    }

    @Test func createsDocumentsOrWritesNothing() throws {
        let server = try Self.server()
        defer { server.stop() }
        // A missing document: the function gets null and `req.id`.
        var response = try server.request("PUT", "/db/_design/update/_update/hello/newdoc")
        #expect(response.status == 201)
        #expect(response.text == "<p>New World</p>")
        #expect(try server.json("GET", "/db/newdoc").json["created"] == true)
        // No document ID and `[null, response]`: 200, nothing written.
        response = try server.request("POST", "/db/_design/update/_update/hello")
        #expect(response.status == 200)
        #expect(response.text == "<p>Empty World</p>")
        response = try server.request("PUT", "/db/_design/update/_update/get-uuid/")
        #expect(response.status == 200)
        #expect(response.text.count == 32)
        response = try server.request("PUT", "/db/_design/update/_update/binary")
        #expect(response.text == "hello")
        #expect(response.header("Content-Type") == "application/octet-stream")
        // `req.uuid` names a new document.
        let (status, json) = try server.json("POST", "/db/_design/update/_update/uuid-doc")
        #expect(status == 201)
        let id = try #require(json["id"]?.stringValue)
        #expect(try server.json("GET", "/db/\(id)").json["made"] == true)
    }

    @Test func writesThroughValidationAndConflictChecks() throws {
        let server = try Self.server()
        defer { server.stop() }
        var (status, json) = try server.json("PUT", "/db/_design/update/_update/in-place/rusty?field=forbidden&value=yes")
        #expect(status == 403)
        #expect(json == ["error": "forbidden", "reason": "no forbidden documents"])
        #expect(try server.json("GET", "/db/rusty").json["forbidden"] == nil)

        (status, json) = try server.json("PUT", "/db/_design/update/_update/stale/rusty")
        #expect(status == 409)
        #expect(json == ["error": "conflict", "reason": "Document update conflict."])

        (status, json) = try server.json("PUT", "/db/_design/update/_update/empty-id/rusty")
        #expect(status == 400)
        #expect(json == ["error": "illegal_docid", "reason": "Document id must not be empty"])
        #expect(try server.json("GET", "/db/rusty").json["_rev"]?.stringValue?.hasPrefix("1-") == true)
    }

    @Test func answersCouchDBErrors() throws {
        let server = try Self.server()
        defer { server.stop() }
        var (status, json) = try server.json("GET", "/db/_design/update/_update/hello/rusty")
        #expect(status == 405)
        #expect(json == ["error": "method_not_allowed", "reason": "Update functions do not allow GET"])
        (status, json) = try server.json("POST", "/db/_design/update/_update/")
        #expect(status == 404)
        #expect(json == ["error": "update_error", "reason": "Invalid path."])
        (status, json) = try server.json("POST", "/db/_design/update/_update/nothere")
        #expect(status == 404)
        #expect(json == ["error": "not_found", "reason": "missing updates function nothere on design doc _design/update"])
        (status, json) = try server.json("PUT", "/db/_design/update/_update/no-response/rusty")
        #expect(status == 500)
        #expect(json == ["error": "render_error", "reason": "undefined response from update function"])
        (status, json) = try server.json("PUT", "/db/_design/missing/_update/hello/rusty")
        #expect(status == 404)
        #expect(json == ["error": "not_found", "reason": "missing"])
    }
}
