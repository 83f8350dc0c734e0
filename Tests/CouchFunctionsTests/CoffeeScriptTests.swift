import CouchCore
import CouchServer
import CouchTestSupport
import Foundation
import Testing

/// Design documents in CoffeeScript (`"language": "coffeescript"`) over real HTTP, after
/// CouchDB's coffee test: views, shows, lists and filters compiled with Debian's CoffeeScript
/// compiler (scripts/setup installs it), and its syntax errors refused as CouchDB refuses them.
@Suite struct CoffeeScriptTests {
    static let design: JSONValue = [
        "language": "coffeescript",
        "views": ["myview": [
            "map": "(doc) -> if doc.foo\n  emit(doc.foo, 1)",
            "reduce": "(keys, values, rereduce) ->\n  sum = 0\n  for x in values\n    sum = sum + x\n  sum",
        ]],
        "shows": ["myshow": "(doc) ->\n  \"Foo #{doc.foo}\""],
        "lists": ["mylist": "(head, req) ->\n  while row = getRow()\n    send(toJSON({\"resp\": \"Foo #{row.value}\"}))\n  return"],
        "filters": ["filter": "(doc) ->\n  doc.foo"],
    ]

    @Test func runsViewsShowsListsAndFilters() throws {
        let server = try TestServer()
        defer { server.stop() }
        try server.createDatabase("db")
        try server.put("db", "a", #"{"foo":100}"#)
        for (n, body) in [#"{"foo":1}"#, #"{"foo":1}"#, #"{"foo":2}"#, #"{"foo":2}"#, #"{"bar":1}"#].enumerated() {
            try server.put("db", "doc\(n)", body)
        }
        #expect(try server.json("PUT", "/db/_design/coffee", body: Self.design.serializedString()).status == 201)
        let (status, view) = try server.json("GET", "/db/_design/coffee/_view/myview")
        #expect(status == 200)
        #expect(view["rows"] == [["key": .null, "value": 5]])
        #expect(try server.request("GET", "/db/_design/coffee/_show/myshow/a").text == "Foo 100")
        #expect(try server.json("GET", "/db/_design/coffee/_list/mylist/myview").json == ["resp": "Foo 5"])
        let (_, changes) = try server.json("GET", "/db/_changes?filter=coffee/filter")
        #expect(changes["results"]?.arrayValue?.count == 5)
    }

    @Test func refusesWhatDoesNotCompile() throws {
        let server = try TestServer()
        defer { server.stop() }
        try server.createDatabase("db")
        let broken: JSONValue = ["language": "coffeescript", "shows": ["bad": "(doc) -> if"]]
        let (status, json) = try server.json("PUT", "/db/_design/broken", body: broken.serializedString())
        #expect(status == 400)
        #expect(json["error"] == "compilation_error")
        #expect(json["reason"]?.stringValue?.hasPrefix("Compilation of the show function 'bad' failed: SyntaxError") == true)
    }
}
