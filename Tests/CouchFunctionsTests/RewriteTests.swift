import CouchCore
import CouchServer
import CouchTestSupport
import Foundation
import Testing

/// `_rewrite` over real HTTP, after CouchDB's rewrite tests: array rules with variables,
/// `*`, methods and queries, targets in the database and beside it, the loop limit and
/// rewrite functions.
@Suite struct RewriteTests {
    static let rules: JSONValue = [
        ["from": "foo", "to": "foo.txt"],
        ["from": "foo2", "to": "foo.txt", "method": "GET"],
        ["from": "hello/:id", "to": "_update/hello/:id", "method": "PUT"],
        ["from": "/welcome", "to": "_show/welcome"],
        ["from": "/welcome/:name", "to": "_show/welcome", "query": ["name": ":name"]],
        ["from": "/welcome2", "to": "_show/welcome", "query": ["name": "user"]],
        ["from": "/welcome3/:name", "to": "_show/welcome2/:name", "method": "GET"],
        ["from": "/query/:start/:end", "to": "_show/query", "query": ["startkey": ":start", "endkey": ":end", "tag": ":end"],
         "formats": ["start": "int"]],
        ["from": "/all/*", "to": "_show/*"],
        ["from": "/db/*", "to": "../../*"],
        ["from": "/", "to": "_show/welcome", "query": ["name": "root"]],
        ["from": "loop", "to": "_rewrite/loop"],
    ]

    static let shows: JSONValue = [
        "welcome": "function(doc, req) { return 'Welcome ' + req.query.name; }",
        "welcome2": "function(doc, req) { return 'Welcome ' + (doc ? doc.name : 'nobody'); }",
        "query": "function(doc, req) { return {json: req.query}; }",
    ]

    static let updates: JSONValue = [
        "hello": "function(doc, req) { if (!doc) return [{_id: req.id}, 'New World']; doc.world = 'hello'; return [doc, 'hello doc']; }",
    ]

    static func server() throws -> TestServer {
        let server = try TestServer()
        try server.createDatabase("db")
        let ddoc: JSONValue = [
            "rewrites": rules, "shows": shows, "updates": updates,
            "_attachments": ["foo.txt": ["content_type": "text/plain", "data": "VGhpcyBpcyBhIGJhc2U2NCBlbmNvZGVkIHRleHQ="]],
        ]
        #expect(try server.json("PUT", "/db/_design/test", body: ddoc.serializedString()).status == 201)
        try server.put("db", "rusty", #"{"name":"Rusty"}"#)
        return server
    }

    @Test func rewritesByRules() throws {
        let server = try Self.server()
        defer { server.stop() }
        var response = try server.request("GET", "/db/_design/test/_rewrite/foo")
        #expect(response.status == 200)
        #expect(response.text == "This is a base64 encoded text")
        #expect(response.header("Content-Type") == "text/plain")
        #expect(try server.request("GET", "/db/_design/test/_rewrite/foo2").text == "This is a base64 encoded text")
        // A rule for GET only: other methods find no rule.
        var (status, json) = try server.json("DELETE", "/db/_design/test/_rewrite/foo2")
        #expect(status == 404)
        #expect(json == ["error": "not_found", "reason": "missing"])

        #expect(try server.request("GET", "/db/_design/test/_rewrite/welcome?name=user").text == "Welcome user")
        #expect(try server.request("GET", "/db/_design/test/_rewrite/welcome/bob").text == "Welcome bob")
        #expect(try server.request("GET", "/db/_design/test/_rewrite/welcome2").text == "Welcome user")
        #expect(try server.request("GET", "/db/_design/test/_rewrite/welcome3/rusty").text == "Welcome Rusty")
        #expect(try server.request("GET", "/db/_design/test/_rewrite").text == "Welcome root")
        #expect(try server.request("GET", "/db/_design/test/_rewrite/all/welcome2/rusty").text == "Welcome Rusty")

        // Bindings fill the query; JSON parameters are sent as JSON, `formats` convert.
        (status, json) = try server.json("GET", "/db/_design/test/_rewrite/query/3/8?key=%5B1%5D")
        #expect(status == 200)
        #expect(json["startkey"] == 3)
        #expect(json["endkey"] == "8")
        #expect(json["tag"] == "8")
        #expect(json["key"] == [1])

        // PUT through a rule to an update function.
        response = try server.request("PUT", "/db/_design/test/_rewrite/hello/rusty")
        #expect(response.status == 201)
        #expect(response.text == "hello doc")
        #expect(try server.json("GET", "/db/rusty").json["world"] == "hello")
        #expect(try server.request("PUT", "/db/_design/test/_rewrite/hello/fresh").text == "New World")
        #expect(try server.request("GET", "/db/fresh").status == 200)

        // `../../*` reaches the database; its query parameters pass (COUCHDB-2031).
        (status, json) = try server.json("GET", "/db/_design/test/_rewrite/db/_design/test?meta=true")
        #expect(status == 200)
        #expect(json["_id"] == "_design/test")
        #expect(json["_revs_info"] != nil)
        (status, json) = try server.json("GET", "/db/_design/test/_rewrite/db/rusty")
        #expect(json["name"] == "Rusty")

        // Rules are not code: they apply in a design document of another language too.
        let erlang: JSONValue = ["language": "erlang", "rewrites": [["from": "doc", "to": "../../rusty"]]]
        #expect(try server.json("PUT", "/db/_design/erlang", body: erlang.serializedString()).status == 201)
        #expect(try server.json("GET", "/db/_design/erlang/_rewrite/doc").json["name"] == "Rusty")
    }

    @Test func refusesInsecureRulesAndLoops() throws {
        let server = try Self.server()
        defer { server.stop() }
        let ddoc: JSONValue = ["rewrites": [["from": "uuids", "to": "../../../_uuids"]]]
        #expect(try server.json("PUT", "/db/_design/server", body: ddoc.serializedString()).status == 201)
        var (status, json) = try server.json("GET", "/db/_design/server/_rewrite/uuids")
        #expect(status == 500)
        #expect(json == ["error": "insecure_rewrite_rule", "reason": "too many ../.. segments"])

        // A rule that rewrites to itself stops at `[httpd] rewrite_limit`.
        (status, json) = try server.json("GET", "/db/_design/test/_rewrite/loop")
        #expect(status == 400)
        #expect(json == ["error": "bad_request", "reason": "Exceeded rewrite recursion limit"])

        // Both limits are configurable, as in CouchDB: from `[chttpd]`, else from `[httpd]`.
        #expect(try server.request("PUT", "/_node/_local/_config/chttpd/secure_rewrites", body: #""false""#).status == 200)
        (status, json) = try server.json("GET", "/db/_design/server/_rewrite/uuids")
        #expect(status == 200)
        #expect(json["uuids"]?.arrayValue?.count == 1)
        #expect(try server.request("PUT", "/_node/_local/_config/httpd/rewrite_limit", body: #""2""#).status == 200)
        let chain: JSONValue = ["rewrites": [["from": "a", "to": "_rewrite/b"], ["from": "b", "to": "_rewrite/c"],
                                             ["from": "c", "to": "foo.txt"]]]
        #expect(try server.json("PUT", "/db/_design/chain", body: chain.serializedString()).status == 201)
        #expect(try server.request("GET", "/db/_design/chain/_rewrite/b").status == 404, "two rewrites: within the limit")
        #expect(try server.json("GET", "/db/_design/chain/_rewrite/a").status == 400, "three rewrites: beyond it")
        // Serial requests are not counted together.
        for _ in 0..<3 { #expect(try server.request("GET", "/db/_design/test/_rewrite/foo").status == 200) }

        let none: JSONValue = ["language": "javascript"]
        #expect(try server.json("PUT", "/db/_design/none", body: none.serializedString()).status == 201)
        (status, json) = try server.json("GET", "/db/_design/none/_rewrite/foo")
        #expect(status == 404)
        #expect(json == ["error": "rewrite_error", "reason": "Invalid path."])
    }

    @Test func rewritesByAFunction() throws {
        let server = try Self.server()
        defer { server.stop() }
        let function = #"""
            function(req) {
              var path = req.path.slice(4);
              if (path[0] == "deny") { return {code: 403, body: "{\"error\":\"forbidden\"}", headers: {"X-Why": "denied"}}; }
              if (path[0] == "doc") { return {path: "../../" + path[1]}; }
              if (path[0] == "show") { return {path: "_show/welcome", query: {name: req.method}}; }
              if (path[0] == "text") { return "_show/welcome2/rusty"; }
              if (path[0] == "bad") { return {path: 42}; }
              return false;
            }
            """#
        let ddoc: JSONValue = ["rewrites": JSONValue(function), "shows": Self.shows]
        #expect(try server.json("PUT", "/db/_design/fun", body: ddoc.serializedString()).status == 201)
        var (status, json) = try server.json("GET", "/db/_design/fun/_rewrite/doc/rusty")
        #expect(status == 200)
        #expect(json["name"] == "Rusty")
        #expect(try server.request("POST", "/db/_design/fun/_rewrite/show", body: "{}").text == "Welcome POST")
        #expect(try server.request("GET", "/db/_design/fun/_rewrite/text").text == "Welcome Rusty")
        let denied = try server.request("GET", "/db/_design/fun/_rewrite/deny")
        #expect(denied.status == 403)
        #expect(denied.header("X-Why") == "denied")
        (status, json) = try server.json("GET", "/db/_design/fun/_rewrite/other")
        #expect(status == 404)
        #expect(json == ["error": "rewrite_error", "reason": "Invalid path."])
        (status, json) = try server.json("GET", "/db/_design/fun/_rewrite/bad")
        #expect(status == 500)
        #expect(json == ["error": "rewrite_error", "reason": "bad path"])
    }
}
