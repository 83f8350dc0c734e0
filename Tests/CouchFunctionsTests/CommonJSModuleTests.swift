import CouchCore
import CouchServer
import CouchTestSupport
import Foundation
import Testing

/// `require()` over real HTTP, after CouchDB's design_docs tests: CommonJS modules kept in
/// the design document, paths from its root or relative to the requiring module, `module.id`
/// as CouchDB gives it, circular requires, and every kind of function that may require
/// (views from `views.lib`).
@Suite struct CommonJSModuleTests {
    static let design: JSONValue = [
        "whatever": [
            "stringzone": "exports.string = 'plankton';",
            "commonjs": [
                "whynot": "exports.test = require('../stringzone'); exports.foo = require('whatever/stringzone');",
                "upper": "exports.testing = require('./whynot').test.string.toUpperCase() + module.id + require('./whynot').foo.string;",
                "circular_one": "require('./circular_two'); exports.name = 'One';",
                "circular_two": "require('./circular_one'); exports.name = 'Two';",
            ],
            "idtest1": ["a": ["b": ["d": "module.exports = require('../c/e').id;"], "c": ["e": "exports.id = module.id;"]]],
            "idtest2": ["a": ["b": ["d": "module.exports = require('../../a/c/e').id;"], "c": ["e": "exports.id = module.id;"]]],
            "idtest3": ["a": ["b": "module.exports = require('./c/d').id;",
                              "c": ["d": "module.exports = require('./e');", "e": "exports.id = module.id;"]]],
            "idtest4": ["a": ["b": "module.exports = require('../a/./c/d').id;",
                              "c": ["d": "module.exports = require('./e');", "e": "exports.id = module.id;"]]],
            "idtest5": ["a": "module.exports = require('whatever/idtest5/b').id;", "b": "exports.id = module.id;"],
            "broken": "exports.x = noSuchVariable;",
            "counter": "exports.runs = (this.runs = (this.runs || 0) + 1);",
        ],
        "views": [
            "lib": ["foo": ["boom": "exports.boom = 'ok';"]],
            "commonjs": ["map": "function(doc) { emit(doc._id, require('views/lib/foo/boom').boom); }"],
        ],
        "shows": [
            "requirey": "function() { return require('whatever/commonjs/upper').testing; }",
            "circular": "function() { require('whatever/commonjs/upper'); return JSON.stringify(this); }",
            "circular_require": "function() { return require('whatever/commonjs/circular_one').name; }",
            "id": "function(doc, req) { return require('whatever/' + req.query.test); }",
            "broken": "function() { return require('whatever/broken').x; }",
            "missing": "function() { return require('whatever/nothing'); }",
            "not_a_module": "function() { return require('whatever/commonjs'); }",
            "twice": "function() { require('whatever/counter'); return String(require('whatever/counter').runs); }",
        ],
        "lists": ["mod": "function(head, req) { send(require('whatever/stringzone').string); }"],
        "updates": ["mod": "function(doc, req) { return [null, require('whatever/stringzone').string]; }"],
        "filters": ["mod": "function(doc, req) { return doc.kind == require('whatever/stringzone').string; }"],
        "validate_doc_update": #"""
            function(newDoc) {
              if (newDoc.kind == 'forbidden' && require('whatever/stringzone').string == 'plankton') {
                throw({forbidden: 'no plankton here'});
              }
            }
            """#,
    ]

    static func server() throws -> TestServer {
        let server = try TestServer()
        try server.createDatabase("db")
        #expect(try server.json("PUT", "/db/_design/test", body: design.serializedString()).status == 201)
        return server
    }

    @Test func resolvesPathsAndModuleIDsAsCouchDB() throws {
        let server = try Self.server()
        defer { server.stop() }
        var response = try server.request("GET", "/db/_design/test/_show/requirey")
        #expect(response.status == 200)
        #expect(response.text == "PLANKTONwhatever/commonjs/upperplankton")
        // Paths relative to the parent, several levels up, to the module, mixed, from the root.
        for (test, id) in [("idtest1/a/b/d", "whatever/idtest1/a/c/e"), ("idtest2/a/b/d", "whatever/idtest2/a/c/e"),
                           ("idtest3/a/b", "whatever/idtest3/a/c/e"), ("idtest4/a/b", "whatever/idtest4/a/c/e"),
                           ("idtest5/a", "whatever/idtest5/b")] {
            response = try server.request("GET", "/db/_design/test/_show/id?test=\(test)")
            #expect(response.status == 200)
            #expect(response.text == id, "\(test)")
        }
        // Circular requires end; the design document (`this`) stays serializable.
        #expect(try server.request("GET", "/db/_design/test/_show/circular_require").text == "One")
        response = try server.request("GET", "/db/_design/test/_show/circular")
        #expect(response.status == 200)
        #expect((try JSONValue.parse(response.body))["_id"] == "_design/test")
        // A module runs once for one function, however often it is required.
        #expect(try server.request("GET", "/db/_design/test/_show/twice").text == "1")
    }

    @Test func answersCouchDBErrors() throws {
        let server = try Self.server()
        defer { server.stop() }
        var (status, json) = try server.json("GET", "/db/_design/test/_show/missing")
        #expect(status == 500)
        #expect(json["error"] == "invalid_require_path")
        #expect(json["reason"]?.stringValue?.hasPrefix("Object has no property \"nothing\".") == true)
        (status, json) = try server.json("GET", "/db/_design/test/_show/not_a_module")
        #expect(json["error"] == "invalid_require_path")
        #expect(json["reason"] == "Must require a JavaScript string, not: object")
        (status, json) = try server.json("GET", "/db/_design/test/_show/broken")
        #expect(status == 400)
        #expect(json["error"] == "compilation_error")
        #expect(json["reason"]?.stringValue?.hasPrefix("Module require('whatever/broken') raised error ReferenceError") == true)
    }

    @Test func everyKindOfFunctionRequires() throws {
        let server = try Self.server()
        defer { server.stop() }
        try server.put("db", "a", #"{"kind":"plankton"}"#)
        try server.put("db", "b", #"{"kind":"krill"}"#)
        let (_, view) = try server.json("GET", "/db/_design/test/_view/commonjs?key=%22a%22")
        #expect(view["rows"] == [["id": "a", "key": "a", "value": "ok"]])
        #expect(try server.request("GET", "/db/_design/test/_list/mod/commonjs").text == "plankton")
        #expect(try server.request("POST", "/db/_design/test/_update/mod").text == "plankton")
        let (_, changes) = try server.json("GET", "/db/_changes?filter=test/mod")
        #expect(changes["results"]?.arrayValue?.map { $0["id"] } == ["a"])
        let (status, refused) = try server.json("PUT", "/db/c", body: #"{"kind":"forbidden"}"#)
        #expect(status == 403)
        #expect(refused["reason"] == "no plankton here")
    }
}
