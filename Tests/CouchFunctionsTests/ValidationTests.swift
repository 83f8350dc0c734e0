import CouchCore
import CouchServer
import CouchTestSupport
import Foundation
import Testing

/// `validate_doc_update` over real HTTP, on every write path.
@Suite struct ValidationTests {
    static let validation = """
        function(newDoc, oldDoc, userCtx, secObj) {
          if (newDoc.forbidden) throw({forbidden: 'no: ' + newDoc._id});
          if (newDoc.needsLogin) throw({unauthorized: 'log in first'});
          if (newDoc._id.indexOf('copy-') == 0 && newDoc.source) throw({forbidden: 'no copies'});
          if (newDoc._deleted && oldDoc && oldDoc.keep) throw({forbidden: 'keep ' + oldDoc._id});
          if (newDoc._attachments && newDoc._attachments['bad.txt']) throw({forbidden: 'no bad attachments'});
          if (oldDoc && oldDoc._attachments && oldDoc._attachments['keep.txt'] &&
              !(newDoc._attachments && newDoc._attachments['keep.txt'])) throw({forbidden: 'keep.txt stays'});
        }
        """

    static func server(_ configuration: ServerConfiguration = .testing()) throws -> TestServer {
        let server = try TestServer(configuration: configuration)
        try server.createDatabase("db")
        let ddoc: JSONValue = ["validate_doc_update": JSONValue(validation)]
        #expect(try server.json("PUT", "/db/_design/rules", body: ddoc.serializedString()).status == 201)
        return server
    }

    @Test func refusesPutPostDeleteCopyAndBulkDocs() throws {
        let server = try Self.server()
        defer { server.stop() }
        var (status, json) = try server.json("PUT", "/db/a", body: #"{"forbidden":true}"#)
        #expect(status == 403)
        #expect(json == ["error": "forbidden", "reason": "no: a"])
        #expect(try server.request("GET", "/db/a").status == 404)
        (status, json) = try server.json("POST", "/db", body: #"{"_id":"b","needsLogin":true}"#)
        #expect(status == 401)
        #expect(json == ["error": "unauthorized", "reason": "log in first"])

        // Deletions pass `_deleted: true` and the old document.
        let rev = try server.put("db", "kept", #"{"keep":true}"#)
        (status, json) = try server.json("DELETE", "/db/kept?rev=\(rev)")
        #expect(status == 403)
        #expect(json["reason"] == "keep kept")

        // COPY
        try server.put("db", "source", #"{"source":true}"#)
        let copy = try server.json("COPY", "/db/source", headers: [("Destination", "copy-1")])
        #expect(copy.status == 403)
        #expect(copy.json["reason"] == "no copies")

        // _bulk_docs: per-document errors, the others written.
        (status, json) = try server.json("POST", "/db/_bulk_docs", body: #"{"docs":[{"_id":"ok"},{"_id":"no","forbidden":1}]}"#)
        #expect(status == 201)
        #expect(json.arrayValue?[0]["ok"] == true)
        #expect(json.arrayValue?[1] == ["id": "no", "error": "forbidden", "reason": "no: no"])
        #expect(try server.request("GET", "/db/ok").status == 200)
        #expect(try server.request("GET", "/db/no").status == 404)

        // Replicated writes (new_edits=false) are validated too.
        (status, json) = try server.json("POST", "/db/_bulk_docs",
                                         body: #"{"new_edits":false,"docs":[{"_id":"r","_rev":"1-abc","forbidden":1}]}"#)
        #expect(json.arrayValue?[0]["error"] == "forbidden", "\(json.serializedString())")
        #expect(try server.request("GET", "/db/r").status == 404)
        (status, _) = try server.json("PUT", "/db/r2?new_edits=false", body: #"{"_rev":"1-abc","forbidden":1}"#)
        #expect(status == 403)
    }

    @Test func refusesAttachmentWrites() throws {
        let server = try Self.server()
        defer { server.stop() }
        let rev = try server.put("db", "doc", "{}")
        var response = try server.request("PUT", "/db/doc/bad.txt?rev=\(rev)", headers: [("Content-Type", "text/plain")], body: "x")
        #expect(response.status == 403)
        #expect(try JSONValue.parse(response.body)["reason"] == "no bad attachments")
        response = try server.request("PUT", "/db/doc/keep.txt?rev=\(rev)", headers: [("Content-Type", "text/plain")], body: "x")
        #expect(response.status == 201)
        let kept = try JSONValue.parse(response.body)["rev"]?.stringValue ?? ""
        response = try server.request("DELETE", "/db/doc/keep.txt?rev=\(kept)")
        #expect(response.status == 403)
        #expect(try JSONValue.parse(response.body)["reason"] == "keep.txt stays")

        // A multipart/related document whose attachment the function refuses.
        let boundary = "b0undary"
        var body = Array("--\(boundary)\r\nContent-Type: application/json\r\n\r\n".utf8)
        body += Array(#"{"_attachments":{"bad.txt":{"follows":true,"content_type":"text/plain","length":5}}}"#.utf8)
        body += Array("\r\n--\(boundary)\r\n\r\nhello\r\n--\(boundary)--".utf8)
        response = try httpRequest(port: server.port, "PUT", "/db/multi",
                                   headers: [("Content-Type", "multipart/related; boundary=\"\(boundary)\"")], body: body)
        #expect(response.status == 403, "\(response.text)")
        #expect(try server.request("GET", "/db/multi").status == 404)
    }

    @Test func functionsSeeCouchDBsUserContextAndSecurityObject() throws {
        let server = try TestServer(configuration: .testing(admins: ["admin": "secret"]))
        defer { server.stop() }
        let admin = basicAuthorization("admin", "secret")
        #expect(try server.json("PUT", "/db", headers: [admin]).status == 201)
        let security = #"{"admins":{"names":[],"roles":[]},"members":{"names":[],"roles":[]}}"#
        #expect(try server.json("PUT", "/db/_security", headers: [admin], body: security).status == 200)
        let echo = "function(doc, old, userCtx, secObj) { throw({forbidden: JSON.stringify([userCtx, secObj])}); }"
        let ddoc: JSONValue = ["validate_doc_update": JSONValue(echo)]
        #expect(try server.json("PUT", "/db/_design/echo", headers: [admin], body: ddoc.serializedString()).status == 201)
        let user = #"{"name":"bob","password":"pw","roles":["reader"],"type":"user"}"#
        #expect(try server.json("PUT", "/_users/org.couchdb.user:bob", headers: [admin], body: user).status == 201)

        let securityObject = try JSONValue.parse(Array(security.utf8))
        let cases: [(headers: [(String, String)], userCtx: JSONValue)] = [
            ([], ["db": "db", "name": .null, "roles": []]),
            ([basicAuthorization("bob", "pw")], ["db": "db", "name": "bob", "roles": ["reader"]]),
            ([admin], ["db": "db", "name": "admin", "roles": ["_admin"]]),
        ]
        for (headers, userCtx) in cases {
            let (status, json) = try server.json("PUT", "/db/doc", headers: headers, body: "{}")
            #expect(status == 403, "server admins are not exempt")
            let seen = try JSONValue.parse(Array((json["reason"]?.stringValue ?? "").utf8))
            #expect(seen.arrayValue?[0] == userCtx)
            #expect(seen.arrayValue?[1] == securityObject)
        }
    }

    @Test func designDocumentsThatDoNotCompileAreRefused() throws {
        let server = try TestServer()
        defer { server.stop() }
        try server.createDatabase("db")
        var (status, json) = try server.json("PUT", "/db/_design/bad", body: #"{"validate_doc_update":"function(newDoc) { if ("}"#)
        #expect(status == 400)
        #expect(json["error"] == "compilation_error")
        #expect(json["reason"]?.stringValue?.contains("SyntaxError") == true, "\(json.serializedString())")
        (status, json) = try server.json("PUT", "/db/_design/bad", body: #"{"filters":{"f":"42"}}"#)
        #expect(status == 400)
        #expect(json == ["error": "compilation_error",
                         "reason": "Compilation of the filter function 'f' failed: Expression does not eval to a function. (42)"])
        (status, json) = try server.json("PUT", "/db/_design/bad", body: #"{"views":{"v":{"map":"function(doc) { emit(doc._id"}}}"#)
        #expect(json["reason"]?.stringValue?.hasPrefix("Compilation of the map function in the 'v' view failed: SyntaxError") == true,
                "\(json.serializedString())")
        #expect(try server.request("GET", "/db/_design/bad").status == 404)
        // Built-in reduces and design documents without functions are fine.
        (status, _) = try server.json("PUT", "/db/_design/good", body: #"{"views":{"v":{"map":"function(doc) {}","reduce":"_count"}},"language":"javascript"}"#)
        #expect(status == 201)
        // Another language is not compiled (nor run): a Mango index's design document.
        (status, _) = try server.json("PUT", "/db/_design/mango", body: #"{"language":"query","views":{"i":{"map":{"fields":{"a":"asc"}},"reduce":"_count"}}}"#)
        #expect(status == 201)
        (status, _) = try server.json("PUT", "/db/_design/erl", body: #"{"language":"erlang","validate_doc_update":"fun({Doc}) -> ok end."}"#)
        #expect(status == 201)
        #expect(try server.json("PUT", "/db/doc", body: "{}").status == 201)
    }

    @Test func runawayFunctionsAreStoppedAndTheServerKeepsAnswering() throws {
        var configuration = ServerConfiguration.testing()
        configuration.functions.timeout = 10
        configuration.functions.memory = 64 * 1024 * 1024
        let server = try TestServer(configuration: configuration)
        defer { server.stop() }
        try server.createDatabase("db")
        let ddoc: JSONValue = ["validate_doc_update": """
            function(doc) {
              if (doc.loop) { while (true) {} }
              if (doc.hog) { var a = []; while (true) { a.push(new Array(10000).fill(1.5)); } }
              if (doc.boom) { return null.x; }
              if (doc.thrown) { throw 'just a string'; }
            }
            """]
        #expect(try server.json("PUT", "/db/_design/bad", body: ddoc.serializedString()).status == 201)

        for (body, error) in [(#"{"loop":true}"#, "os_process_error"), (#"{"hog":true}"#, "os_process_error")] {
            let slow = Background { try server.json("PUT", "/db/slow", body: body) }
            Thread.sleep(forTimeInterval: 0.2)
            // Meanwhile: other requests, and writes to the same database, are answered at once.
            let answered = answeredWhile(slow, [
                { try server.request("GET", "/").status == 200 },
                { try server.json("PUT", "/db/quick-\(UUID().uuidString)", body: "{}").status == 201 },
            ])
            if body.contains("loop") { #expect(answered, "answered while the function runs") }
            let (status, json) = try slow.value()
            #expect(status == 500)
            #expect(json["error"] == JSONValue(error), "\(json.serializedString())")
        }
        var (status, json) = try server.json("PUT", "/db/boom", body: #"{"boom":true}"#)
        #expect(status == 500)
        #expect(json["error"] == "TypeError", "\(json.serializedString())")
        (status, json) = try server.json("PUT", "/db/thrown", body: #"{"thrown":true}"#)
        #expect(status == 500)
        #expect(json == ["error": "unknown_error", "reason": "just a string"])
        #expect(try server.json("PUT", "/db/fine", body: "{}").status == 201)
    }

    /// Whatever a validation function throws, only CouchDB's `{forbidden}` and
    /// `{unauthorized}` get their 4xx; any other throw refuses the write with a 500 (as
    /// CouchDB's couchjs answers), in `PUT` and in each document of a `_bulk_docs`, and
    /// nothing is stored: values JSON cannot carry and functions that tamper with the
    /// engine's JSON or prototypes included.
    @Test func everyOtherThrowRefusesTheWrite() throws {
        let server = try TestServer()
        defer { server.stop() }
        try server.createDatabase("db")
        let thrownValues: [(String, String)] = [
            ("Symbol('x')", "parse_error"), ("function() {}", "parse_error"), ("{toJSON: function() {}}", "parse_error"),
            ("{toJSON: function() { throw new Error('no'); }}", "parse_error"),
            ("{get forbidden() { throw 1; }}", "parse_error"),
            ("null", "unnamed_error"), ("undefined", "unnamed_error"), ("42", "unnamed_error"), ("true", "unnamed_error"),
            ("1", "unnamed_error"), ("[1, 2]", "unnamed_error"), ("{}", "unnamed_error"), ("{a: 1, b: 2}", "unnamed_error"),
            ("'pass'", "unknown_error"), ("{a: 1}", "unknown_error"), ("{forbidden: Symbol()}", "unnamed_error"),
            ("{forbidden: undefined}", "unnamed_error"), ("new TypeError('bad')", "TypeError"),
            ("['error', 'not_yours', 'why']", "not_yours"), ("Object.create(null)", "unnamed_error"),
            // Tampering with what carries the answer out of the engine changes nothing.
            ("(JSON.stringify = function() { return undefined; }, {forbidden: 'still'})", "forbidden"),
            ("(Array.prototype.toJSON = function() { return ['pass', 'pass']; }, {forbidden: 'still'})", "forbidden"),
            ("(Object.defineProperty(Array.prototype, '0', {set: function() {}, configurable: true}), {forbidden: 'still'})",
             "forbidden"),
        ]
        for (index, (thrown, error)) in thrownValues.enumerated() {
            let ddoc: JSONValue = ["validate_doc_update": JSONValue("function(newDoc) { if (!newDoc.ok) throw \(thrown); }")]
            #expect(try server.json("PUT", "/db/_design/v\(index)", body: ddoc.serializedString()).status == 201)
            let (status, json) = try server.json("PUT", "/db/doc\(index)", body: "{}")
            #expect(status == (error == "forbidden" ? 403 : 500), "throw \(thrown): \(status) \(json.serializedString())")
            #expect(json["error"] == JSONValue(error), "throw \(thrown): \(json.serializedString())")
            #expect(try server.request("GET", "/db/doc\(index)").status == 404, "throw \(thrown) stored the document")
            let bulk = try server.json("POST", "/db/_bulk_docs", body: #"{"docs": [{"_id": "bulk\#(index)"}, {"_id": "fine\#(index)", "ok": true}]}"#)
            #expect(bulk.json.arrayValue?.first?["error"] == JSONValue(error), "throw \(thrown) in _bulk_docs: \(bulk.json.serializedString())")
            #expect(try server.request("GET", "/db/bulk\(index)").status == 404, "throw \(thrown) stored the bulk document")
            // Deleted so that the next function alone judges the next write.
            let rev = try #require(try server.json("GET", "/db/_design/v\(index)").json["_rev"]?.stringValue)
            #expect(try server.request("DELETE", "/db/_design/v\(index)?rev=\(rev)").status == 200)
        }
        #expect(try server.json("PUT", "/db/fine", body: #"{"ok": true}"#).status == 201)
    }
}
