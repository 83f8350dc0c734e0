import CouchCore
import CouchServer
import CouchTestSupport
import Foundation
import Testing

/// `_show` over real HTTP, after CouchDB's own show tests: with a document, without one,
/// with a missing or deleted one, content negotiation through `provides`, the list API,
/// ETags and errors.
@Suite struct ShowFunctionTests {
    static let shows: JSONValue = [
        "hello": #"""
            function(doc, req) {
              if (doc) { return "Hello " + doc.name; }
              return req.id ? "New World " + req.id : "Empty World";
            }
            """#,
        "just-name": #"""
            function(doc, req) {
              if (doc) { return {body: "Just " + doc.name}; }
              return {body: "No such doc", code: 404};
            }
            """#,
        "json": "function(doc, req) { return {json: doc}; }",
        "req": "function(doc, req) { return {json: req}; }",
        "fail": "function(doc, req) { return doc._id; }",
        "render-error": "function(doc, req) { return noSuchVariable; }",
        "forbid": "function(doc, req) { throw(['error', 'forbidden', 'not for you']); }",
        // Only `{error, reason}` and `['error', ...]` keep their names in a show: this is a render_error.
        "throw-object": "function(doc, req) { throw({forbidden: 'not for you'}); }",
        "empty": "function(doc, req) { return ''; }",
        "headers": #"""
            function(doc, req) {
              return {code: 202, headers: {"Content-Type": "text/plain", "X-Extra": "yes", "ETag": "mine"}, body: "plain"};
            }
            """#,
        "binary": "function(doc, req) { return {base64: 'aGVsbG8gd29ybGQh', headers: {'Content-Type': 'application/octet-stream'}}; }",
        "bad-member": "function(doc, req) { return {bodyy: 'typo'}; }",
        "hostile-headers": #"""
            function(doc, req) {
              return {body: "intact", headers: {"Content-Length": "1", "X-Split": "a\r\nSet-Cookie: stolen=1", "Connection": "close"}};
            }
            """#,
        "odd-code": "function(doc, req) { return {code: 99, body: 'no'}; }",
        "list-api": #"""
            function(doc, req) {
              start({"X-Couch-Test-Header": "Yeah"});
              send("Hey ");
              return "Dude";
            }
            """#,
        "provides-and-return": #"""
            function(doc, req) {
              provides("text", function() { send("4, "); send("5, "); return "6!"; });
              send("1, ");
              send("2, ");
              return "3, ";
            }
            """#,
        "provides": #"""
            function(doc, req) {
              registerType("foo", "application/foo", "application/x-foo");
              provides("html", function() { return "You said \"" + doc.word + "\"."; });
              provides("foo", function() { return "foofoo"; });
              provides("json", function() { return toJSON({word: doc.word}); });
            }
            """#,
    ]

    static func server() throws -> TestServer {
        let server = try TestServer()
        try server.createDatabase("db")
        let ddoc: JSONValue = ["shows": shows]
        #expect(try server.json("PUT", "/db/_design/template", body: ddoc.serializedString()).status == 201)
        try server.put("db", "rusty", #"{"word":"plankton","name":"Rusty"}"#)
        return server
    }

    @Test func rendersWithAndWithoutADocument() throws {
        let server = try Self.server()
        defer { server.stop() }
        var response = try server.request("GET", "/db/_design/template/_show/hello/rusty")
        #expect(response.status == 200)
        #expect(response.text == "Hello Rusty")
        #expect(response.header("Content-Type") == "text/html; charset=utf-8")
        #expect(response.header("Content-Security-Policy") == "sandbox")
        #expect(response.header("Vary") == "Accept")

        response = try server.request("GET", "/db/_design/template/_show/hello")
        #expect(response.text == "Empty World")
        // A missing document: the function gets null, and `req.id` names it.
        response = try server.request("GET", "/db/_design/template/_show/hello/nobody")
        #expect(response.status == 200)
        #expect(response.text == "New World nobody")
        response = try server.request("GET", "/db/_design/template/_show/just-name/nobody")
        #expect(response.status == 404)
        #expect(response.text == "No such doc")
        // A function that fails on the null document of a missing one: CouchDB's 404.
        let (status, json) = try server.json("GET", "/db/_design/template/_show/fail/nobody")
        #expect(status == 404)
        #expect(json == ["error": "not_found", "reason": "document not found"])

        // A deleted document is null too.
        let rev = try server.put("db", "gone", #"{"name":"Gone"}"#)
        #expect(try server.request("GET", "/db/_design/template/_show/hello/gone").text == "Hello Gone")
        #expect(try server.request("DELETE", "/db/gone?rev=\(rev)").status == 200)
        #expect(try server.request("GET", "/db/_design/template/_show/hello/gone").text == "New World gone")

        // IDs with slashes, and POST.
        try server.put("db", "a%2Fb%2Fc", #"{"name":"Slashed"}"#)
        #expect(try server.request("GET", "/db/_design/template/_show/hello/a/b/c").text == "Hello Slashed")
        #expect(try server.request("POST", "/db/_design/template/_show/hello/rusty", body: "{}").text == "Hello Rusty")
        #expect(try server.request("GET", "/db/_design/template/_show/empty").text == "")
    }

    @Test func passesTheDocumentAndRequestAsCouchDBDoes() throws {
        let server = try Self.server()
        defer { server.stop() }
        var (status, doc) = try server.json("GET", "/db/_design/template/_show/json/rusty")
        #expect(status == 200)
        #expect(doc["_id"] == "rusty")
        #expect(doc["name"] == "Rusty")
        #expect(doc["_revisions"]?["start"] == 1)
        (status, doc) = try server.json("GET", "/db/_design/template/_show/json/nobody")
        #expect(doc == .null)

        let (_, req) = try server.json("GET", "/db/_design/template/_show/req/rusty?foo=bar&key=%5B1%2C2%5D",
                                       headers: [("X-Foo", "bar"), ("Accept", "application/json")])
        #expect(req["method"] == "GET")
        #expect(req["id"] == "rusty")
        #expect(req["query"] == ["foo": "bar", "key": [1, 2]])
        #expect(req["headers"]?["X-Foo"] == "bar")
        #expect(req["path"] == ["db", "_design", "template", "_show", "req", "rusty"])
        #expect(req["info"]?["db_name"] == "db")
        #expect(req["userCtx"]?["db"] == "db")
        #expect(req["uuid"]?.stringValue?.count == 32)
        #expect(req["body"] == "undefined")
        #expect(req["raw_path"] == "/db/_design/template/_show/req/rusty?foo=bar&key=%5B1%2C2%5D")
    }

    @Test func responseObjectsAndTheListAPI() throws {
        let server = try Self.server()
        defer { server.stop() }
        var response = try server.request("GET", "/db/_design/template/_show/headers/rusty")
        #expect(response.status == 202)
        #expect(response.text == "plain")
        #expect(response.header("Content-Type") == "text/plain")
        #expect(response.header("X-Extra") == "yes")
        #expect(response.header("ETag") != "mine", "the function cannot set the ETag")

        response = try server.request("GET", "/db/_design/template/_show/binary/rusty")
        #expect(response.text == "hello world!")
        #expect(response.header("Content-Type") == "application/octet-stream")

        response = try server.request("GET", "/db/_design/template/_show/json/rusty")
        #expect(response.header("Content-Type") == "application/json")

        response = try server.request("GET", "/db/_design/template/_show/list-api/rusty")
        #expect(response.text == "Hey Dude")
        #expect(response.header("X-Couch-Test-Header") == "Yeah")
        // Chunks, return value, provided chunks, provided return value: CouchDB's order.
        response = try server.request("GET", "/db/_design/template/_show/provides-and-return/rusty?format=text")
        #expect(response.text == "1, 2, 3, 4, 5, 6!")
        #expect(response.header("Content-Type") == "text/plain; charset=utf-8")

        var (status, json) = try server.json("GET", "/db/_design/template/_show/bad-member/rusty")
        #expect(status == 500)
        #expect(json["error"] == "external_response_error")
        (status, json) = try server.json("GET", "/db/_design/template/_show/odd-code/rusty")
        #expect(status == 500)
        #expect(json["error"] == "external_response_error")

        // Headers cannot frame the message nor split it.
        let connection = try HTTPTestConnection(port: server.port)
        defer { connection.close() }
        response = try connection.request("GET", "/db/_design/template/_show/hostile-headers/rusty")
        #expect(response.status == 200)
        #expect(response.text == "intact")
        #expect(response.header("Set-Cookie") == nil)
        #expect(try connection.request("GET", "/db/_design/template/_show/hello/rusty").text == "Hello Rusty", "the connection is still usable")
    }

    @Test func negotiatesTheContentTypeThroughProvides() throws {
        let server = try Self.server()
        defer { server.stop() }
        var response = try server.request("GET", "/db/_design/template/_show/provides/rusty",
                                          headers: [("Accept", "text/html,application/atom+xml; q=0.9")])
        #expect(response.text == #"You said "plankton"."#)
        #expect(response.header("Content-Type") == "text/html; charset=utf-8")

        response = try server.request("GET", "/db/_design/template/_show/provides/rusty", headers: [("Accept", "application/x-foo")])
        #expect(response.text == "foofoo")
        #expect(response.header("Content-Type") == "application/x-foo")

        response = try server.request("GET", "/db/_design/template/_show/provides/rusty",
                                      headers: [("Accept", "application/json;q=0.9, text/html;q=0.1")])
        #expect(try JSONValue.parse(response.body) == ["word": "plankton"])
        #expect(response.header("Content-Type") == "application/json")

        // `?format=` wins over Accept; without either the first `provides` does.
        response = try server.request("GET", "/db/_design/template/_show/provides/rusty?format=foo", headers: [("Accept", "text/html")])
        #expect(response.text == "foofoo")
        #expect(try server.request("GET", "/db/_design/template/_show/provides/rusty").header("Content-Type")
                == "text/html; charset=utf-8")

        let (status, json) = try server.json("GET", "/db/_design/template/_show/provides/rusty", headers: [("Accept", "text/monkeys")])
        #expect(status == 406)
        #expect(json["error"] == "not_acceptable")
        #expect(json["reason"]?.stringValue?.hasPrefix("Content-Type text/monkeys not supported, try one of:") == true)
    }

    @Test func etagsFollowTheDocumentAndTheDesign() throws {
        let server = try Self.server()
        defer { server.stop() }
        let first = try server.request("GET", "/db/_design/template/_show/just-name/rusty")
        let etag = try #require(first.header("ETag"))
        #expect(try server.request("GET", "/db/_design/template/_show/just-name/rusty", headers: [("If-None-Match", etag)]).status == 304)
        // Another Accept header is another response.
        let other = try server.request("GET", "/db/_design/template/_show/just-name/rusty", headers: [("Accept", "text/plain")])
        #expect(other.header("ETag") != etag)
        // A new revision of the document changes it.
        let rev = try #require(try server.json("GET", "/db/rusty").json["_rev"]?.stringValue)
        try server.put("db", "rusty", #"{"_rev":"\#(rev)","name":"Crusty"}"#)
        let after = try server.request("GET", "/db/_design/template/_show/just-name/rusty", headers: [("If-None-Match", etag)])
        #expect(after.status == 200)
        #expect(after.text == "Just Crusty")
    }

    @Test func answersCouchDBErrors() throws {
        let server = try Self.server()
        defer { server.stop() }
        var (status, json) = try server.json("GET", "/db/_design/template/_show/")
        #expect(status == 404)
        #expect(json == ["error": "show_error", "reason": "Invalid path."])
        (status, json) = try server.json("GET", "/db/_design/nothere/_show/hello/rusty")
        #expect(status == 404)
        #expect(json == ["error": "not_found", "reason": "missing"])
        (status, json) = try server.json("GET", "/db/_design/template/_show/nothere/rusty")
        #expect(status == 404)
        #expect(json == ["error": "not_found", "reason": "missing shows function nothere on design doc _design/template"])
        (status, json) = try server.json("GET", "/db/_design/template/_show/render-error/rusty")
        #expect(status == 500)
        #expect(json["error"] == "render_error")
        #expect(json["reason"]?.stringValue?.contains("noSuchVariable") == true)
        (status, json) = try server.json("GET", "/db/_design/template/_show/forbid/rusty")
        #expect(status == 403)
        #expect(json == ["error": "forbidden", "reason": "not for you"])
        (status, json) = try server.json("GET", "/db/_design/template/_show/throw-object/rusty")
        #expect(status == 500)
        #expect(json["error"] == "render_error")
        (status, json) = try server.json("GET", "/nodb/_design/template/_show/hello")
        #expect(status == 404)
        #expect(json == ["error": "not_found", "reason": "Database does not exist."])
        #expect(try server.request("DELETE", "/db/_design/template/_show/hello").status == 405)
        // The server is still up.
        #expect(try server.request("GET", "/db/_design/template/_show/hello/rusty").status == 200)
    }
}
