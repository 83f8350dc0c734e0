import CouchCore
import CouchServer
import CouchTestSupport
import Foundation
import Testing

/// `_list` over real HTTP, after CouchDB's list tests, here over `_all_docs` (which CouchDB
/// also lists): `getRow`/`send`/`start`, the view's head, query parameters passed to the
/// view, `provides`, POSTed keys and errors.
@Suite struct ListFunctionTests {
    static let lists: JSONValue = [
        "basic": #"""
            function(head, req) {
              send("head total=" + head.total_rows + " offset=" + head.offset + ";");
              var row;
              while (row = getRow()) { send(row.id + (row.doc ? "(" + row.doc.n + ")" : "") + ","); }
              return "tail";
            }
            """#,
        "headers": #"""
            function(head, req) {
              start({code: 201, headers: {"Content-Type": "text/plain", "X-List": "yes"}});
              send("first ");
              var row = getRow();
              send(row.key);
              return " last";
            }
            """#,
        "no-rows": "function(head, req) { return 'nothing read'; }",
        // Headers given after the first getRow() still apply while no chunk was sent.
        "late-headers": #"""
            function(head, req) {
              getRow();
              start({code: 400, headers: {"X-My-Header": "MyHeader"}});
              send("bad request");
            }
            """#,
        "too-many-rows": #"""
            function(head, req) {
              var row;
              while (row = getRow()) { send(row.id + ","); }
              return "after: " + toJSON(getRow());
            }
            """#,
        "formats": #"""
            function(head, req) {
              provides("html", function() {
                send("<ul>");
                var row;
                while (row = getRow()) { send("<li>" + row.id + "</li>"); }
                return "</ul>";
              });
              provides("json", function() {
                var ids = [], row;
                while (row = getRow()) { ids.push(row.id); }
                return toJSON(ids);
              });
            }
            """#,
        "broken": "function(head, req) { var row = getRow(); return row.nothing.here; }",
        "req": "function(head, req) { send(toJSON({method: req.method, query: req.query, id: req.id})); }",
    ]

    static func server() throws -> TestServer {
        let server = try TestServer()
        try server.createDatabase("db")
        let ddoc: JSONValue = ["lists": lists]
        #expect(try server.json("PUT", "/db/_design/lists", body: ddoc.serializedString()).status == 201)
        for n in 1...3 { try server.put("db", "doc\(n)", #"{"n":\#(n)}"#) }
        return server
    }

    @Test func rendersRowsWithTheViewsHeadAndParameters() throws {
        let server = try Self.server()
        defer { server.stop() }
        var response = try server.request("GET", "/db/_design/lists/_list/basic/_all_docs")
        #expect(response.status == 200)
        #expect(response.text == "head total=4 offset=0;_design/lists,doc1,doc2,doc3,tail")
        #expect(response.header("Content-Security-Policy") == "sandbox")
        #expect(response.header("Content-Type") == "application/json")
        // The view's own parameters.
        response = try server.request("GET", #"/db/_design/lists/_list/basic/_all_docs?startkey="doc2"&include_docs=true"#
            .replacingOccurrences(of: "\"", with: "%22"))
        #expect(response.text == "head total=4 offset=2;doc2(2),doc3(3),tail")
        response = try server.request("GET", "/db/_design/lists/_list/basic/_all_docs?descending=true&limit=2")
        #expect(response.text == "head total=4 offset=0;doc3,doc2,tail")
        // POST with keys: no offset, as CouchDB 3.4's `_all_docs` has none for keys.
        response = try server.request("POST", "/db/_design/lists/_list/basic/_all_docs", body: #"{"keys":["doc3","doc1"]}"#)
        #expect(response.text == "head total=4 offset=null;doc3,doc1,tail")
        // The list in one design document, the rows from another's view path: `_all_docs` too.
        response = try server.request("GET", "/db/_design/lists/_list/basic/other/_all_docs?limit=1")
        #expect(response.text == "head total=4 offset=0;_design/lists,tail")

        let (_, req) = try server.json("GET", "/db/_design/lists/_list/req/_all_docs?limit=1&key=%22doc1%22")
        #expect(req == ["method": "GET", "query": ["limit": "1", "key": "doc1"], "id": .null])
        // CouchDB runs a list for OPTIONS as for GET.
        let (status, options) = try server.json("OPTIONS", "/db/_design/lists/_list/req/_all_docs?limit=1")
        #expect(status == 200)
        #expect(options["method"] == "OPTIONS")
    }

    @Test func startsWithHeadersAndFinishesWithoutRows() throws {
        let server = try Self.server()
        defer { server.stop() }
        var response = try server.request("GET", "/db/_design/lists/_list/headers/_all_docs?startkey=%22doc1%22")
        #expect(response.status == 201)
        #expect(response.header("Content-Type") == "text/plain")
        #expect(response.header("X-List") == "yes")
        #expect(response.text == "first doc1 last")
        response = try server.request("GET", "/db/_design/lists/_list/late-headers/_all_docs")
        #expect(response.status == 400)
        #expect(response.header("X-My-Header") == "MyHeader")
        #expect(response.text == "bad request")
        response = try server.request("GET", "/db/_design/lists/_list/too-many-rows/_all_docs?limit=1")
        #expect(response.text == "_design/lists,after: null")
        response = try server.request("GET", "/db/_design/lists/_list/no-rows/_all_docs")
        #expect(response.status == 200)
        #expect(response.text == "nothing read")

        let etag = try #require(response.header("ETag"))
        #expect(try server.request("GET", "/db/_design/lists/_list/no-rows/_all_docs", headers: [("If-None-Match", etag)]).status == 304)
        try server.put("db", "doc4", "{}")
        #expect(try server.request("GET", "/db/_design/lists/_list/no-rows/_all_docs", headers: [("If-None-Match", etag)]).status == 200)
    }

    @Test func negotiatesTheContentType() throws {
        let server = try Self.server()
        defer { server.stop() }
        var response = try server.request("GET", "/db/_design/lists/_list/formats/_all_docs?startkey=%22doc%22", headers: [("Accept", "text/html")])
        #expect(response.text == "<ul><li>doc1</li><li>doc2</li><li>doc3</li></ul>")
        #expect(response.header("Content-Type") == "text/html; charset=utf-8")
        response = try server.request("GET", "/db/_design/lists/_list/formats/_all_docs?startkey=%22doc%22&format=json")
        #expect(try JSONValue.parse(response.body) == ["doc1", "doc2", "doc3"])
        #expect(response.header("Content-Type") == "application/json")
        let (status, json) = try server.json("GET", "/db/_design/lists/_list/formats/_all_docs", headers: [("Accept", "image/png")])
        #expect(status == 406)
        #expect(json["error"] == "not_acceptable")
    }

    @Test func rendersMapAndReduceViewsOfThisAndAnotherDesignDocument() throws {
        let server = try Self.server()
        defer { server.stop() }
        let views: JSONValue = ["views": [
            "by-n": ["map": "function(doc) { if (doc.n) emit(doc.n, 'v' + doc.n); }"],
            "sum": ["map": "function(doc) { if (doc.n) emit(doc.n % 2, doc.n); }", "reduce": "_sum"],
        ], "lists": ["keys": #"""
            function(head, req) {
              var row, out = [];
              while (row = getRow()) { out.push(toJSON(row.key) + "=" + toJSON(row.value)); }
              return "total=" + head.total_rows + " " + out.join(" ");
            }
            """#]]
        #expect(try server.json("PUT", "/db/_design/views", body: views.serializedString()).status == 201)
        var response = try server.request("GET", "/db/_design/views/_list/keys/by-n?startkey=2")
        #expect(response.status == 200)
        #expect(response.text == #"total=3 2="v2" 3="v3""#)
        // The list of one design document over the view of another.
        response = try server.request("GET", "/db/_design/lists/_list/basic/views/by-n?include_docs=true&descending=true")
        #expect(response.text == "head total=3 offset=0;doc3(3),doc2(2),doc1(1),tail")
        response = try server.request("POST", "/db/_design/views/_list/keys/by-n", body: #"{"keys":[3,1]}"#)
        #expect(response.text == #"total=3 3="v3" 1="v1""#)
        // Reduce views: no total, grouped rows.
        response = try server.request("GET", "/db/_design/views/_list/keys/sum?group=true")
        #expect(response.text == "total=undefined 0=2 1=4")
        response = try server.request("GET", "/db/_design/views/_list/keys/sum")
        #expect(response.text == "total=undefined null=6")
        // The view's own errors and 404s.
        var (status, json) = try server.json("GET", "/db/_design/views/_list/keys/nothere")
        #expect(status == 404)
        #expect(json["error"] == "not_found")
        (status, json) = try server.json("GET", "/db/_design/views/_list/keys/by-n?group=true")
        #expect(status == 400)
        #expect(json["error"] == "query_parse_error")
        (status, json) = try server.json("GET", "/db/_design/lists/_list/basic/nothere/by-n")
        #expect(status == 404)
    }

    @Test func answersCouchDBErrors() throws {
        let server = try Self.server()
        defer { server.stop() }
        var (status, json) = try server.json("GET", "/db/_design/lists/_list/basic")
        #expect(status == 404)
        #expect(json == ["error": "list_error", "reason": "Bad path."])
        (status, json) = try server.json("GET", "/db/_design/lists/_list/nothere/_all_docs")
        #expect(status == 404)
        #expect(json == ["error": "not_found", "reason": "missing lists function nothere on design doc _design/lists"])
        (status, json) = try server.json("GET", "/db/_design/lists/_list/broken/_all_docs")
        #expect(status == 500)
        #expect(json["error"] == "render_error")
        // The view's own errors.
        (status, json) = try server.json("GET", "/db/_design/lists/_list/basic/_all_docs?limit=-1")
        #expect(status == 400)
        #expect(json["error"] == "query_parse_error")
        (status, json) = try server.json("POST", "/db/_design/lists/_list/basic/_all_docs", headers: [("Content-Type", "text/plain")],
                                         body: #"{"keys":[]}"#)
        #expect(status == 415)
        #expect(try server.request("PUT", "/db/_design/lists/_list/basic/_all_docs").status == 405)
    }
}
