import CouchCore
import CouchServer
import CouchTestSupport
import Foundation
import Testing

/// Named filters on `_changes`, over real HTTP, in every feed mode.
@Suite struct FilterTests {
    static let design: JSONValue = [
        "filters": [
            "by_type": "function(doc, req) { return doc.type == req.query.type; }",
            "by_body": "function(doc, req) { return req.method == 'POST' && JSON.parse(req.body).want == doc._id; }",
            "probe": "function(doc, req) { if (doc._id == 'probe') throw({error: 'req', reason: JSON.stringify(req)}); return false; }",
        ],
        "views": ["v": ["map": "function(doc) { emit(doc._id, null); }"]],
    ]

    /// a and c have type x, b type y; c is then deleted keeping its type.
    static func server() throws -> TestServer {
        let server = try TestServer()
        try server.createDatabase("db")
        #expect(try server.json("PUT", "/db/_design/app", body: design.serializedString()).status == 201)
        try server.put("db", "a", #"{"type":"x"}"#)
        try server.put("db", "b", #"{"type":"y"}"#)
        let rev = try server.put("db", "c", #"{"type":"x"}"#)
        #expect(try server.json("PUT", "/db/c", body: #"{"_rev":"\#(rev)","_deleted":true,"type":"x"}"#).status == 201)
        return server
    }

    static func ids(_ rows: [JSONValue]) -> [String] { rows.compactMap { $0["id"]?.stringValue } }

    @Test func namedFilterWithQueryParametersInEveryFeedMode() throws {
        let server = try Self.server()
        defer { server.stop() }
        let filter = "filter=app/by_type&type=x"
        let normal = try server.json("GET", "/db/_changes?\(filter)").json
        #expect(Self.ids(normal["results"]?.arrayValue ?? []) == ["a", "c"])
        #expect(normal["results"]?.arrayValue?.last?["deleted"] == true)

        let longpoll = try server.json("GET", "/db/_changes?feed=longpoll&\(filter)").json
        #expect(Self.ids(longpoll["results"]?.arrayValue ?? []) == ["a", "c"])

        let continuous = try server.request("GET", "/db/_changes?feed=continuous&timeout=0&\(filter)").text
        let lines = try continuous.split(separator: "\n").map { try JSONValue.parse(Array($0.utf8)) }
        #expect(Self.ids(lines) == ["a", "c"])
        #expect(lines.last?["last_seq"] != nil)

        let events = try server.request("GET", "/db/_changes?feed=eventsource&timeout=0&\(filter)").text
        let data = try events.split(separator: "\n").filter { $0.hasPrefix("data: {") }
            .map { try JSONValue.parse(Array($0.dropFirst(6).utf8)) }
        #expect(Self.ids(data) == ["a", "c"])

        // A longpoll feed waiting for a change that passes: b2 does not, a2 does.
        let waiting = Background { try server.json("GET", "/db/_changes?feed=longpoll&since=now&\(filter)").json }
        Thread.sleep(forTimeInterval: 0.2)
        try server.put("db", "b2", #"{"type":"y"}"#)
        try server.put("db", "a2", #"{"type":"x"}"#)
        let woken = try waiting.value()
        #expect(Self.ids(woken["results"]?.arrayValue ?? []) == ["a2"])

        // POST: the body reaches the filter as req.body.
        let posted = try server.json("POST", "/db/_changes?filter=app/by_body", body: #"{"want":"b"}"#).json
        #expect(Self.ids(posted["results"]?.arrayValue ?? []) == ["b"])
    }

    /// A replicated revision may hold quotes and backslashes (CouchDB keeps any digest that is not
    /// 32 hex digits): filters and map functions see it as a string, conflicts included.
    @Test func functionsSeeRevisionsThatNeedEscapes() throws {
        let server = try Self.server()
        defer { server.stop() }
        let created = try server.json("POST", "/db/_bulk_docs", body: #"""
            {"new_edits":false,"docs":[{"_id":"odd","_rev":"1-a\"b\\c","type":"x"},{"_id":"odd","_rev":"1-a\"a","type":"x"}]}
            """#)
        #expect(created.status == 201)
        let filtered = try server.json("GET", "/db/_changes?filter=app/by_type&type=x").json
        #expect(Self.ids(filtered["results"]?.arrayValue ?? []) == ["a", "c", "odd"])
        try server.put("db", "_design/revs", #"{"views":{"r":{"map":"function(doc) { emit(doc._rev, doc._conflicts || null); }"}}}"#)
        let view = try server.json("GET", "/db/_design/revs/_view/r?key=%221-a%5C%22b%5C%5Cc%22").json
        #expect(view["rows"]?.arrayValue?.first?["id"] == "odd")
        #expect(view["rows"]?.arrayValue?.first?["value"] == [#"1-a"a"#])
    }

    @Test func theRequestObjectIsCouchDBs() throws {
        let server = try Self.server()
        defer { server.stop() }
        try server.put("db", "probe", "{}")
        let response = try server.request("GET", "/db/_changes?filter=app/probe&x=1", headers: [("X-Test", "yes")])
        let (status, json) = (response.status, try JSONValue.parse(response.body))
        #expect(status == 500)
        #expect(json["error"] == "req")
        let req = try JSONValue.parse(Array((json["reason"]?.stringValue ?? "").utf8))
        for key in ["info", "id", "uuid", "method", "path", "query", "headers", "body", "peer", "form", "cookie", "userCtx", "secObj"] {
            #expect(req[key] != nil, "req.\(key)")
        }
        #expect(req["method"] == "GET")
        #expect(req["query"] == ["filter": "app/probe", "x": "1"])
        #expect(req["path"] == ["db", "_changes"])
        #expect(req["headers"]?["X-Test"] == "yes")
        #expect(req["info"]?["db_name"] == "db")
        #expect(req["userCtx"] == ["db": "db", "name": .null, "roles": ["_admin"]], "the admin party")
    }

    @Test func aLoopingFilterIsStoppedAndTheServerKeepsAnswering() throws {
        var configuration = ServerConfiguration.testing()
        // Long enough that the requests made meanwhile come back first on a loaded machine.
        configuration.functions.timeout = 10
        let server = try TestServer(configuration: configuration)
        defer { server.stop() }
        try server.createDatabase("db")
        let design: JSONValue = ["filters": ["loop": "function(doc) { while (true) {} }"]]
        #expect(try server.json("PUT", "/db/_design/app", body: design.serializedString()).status == 201)
        let looping = Background { try server.json("GET", "/db/_changes?filter=app/loop") }
        Thread.sleep(forTimeInterval: 0.2)
        #expect(answeredWhile(looping, [
            { try server.json("GET", "/db/_changes").status == 200 },
            { try server.json("PUT", "/db/doc-\(UUID().uuidString)", body: "{}").status == 201 },
        ]), "answered while the filter runs")
        let (status, json) = try looping.value()
        #expect(status == 500)
        #expect(json["error"] == "os_process_error", "\(json.serializedString())")
    }

    @Test func missingFiltersAndViewsAnswerCouchDBs404() throws {
        let server = try Self.server()
        defer { server.stop() }
        try server.put("db", "_design/nofilters", "{}")
        let cases: [(String, Int, JSONValue)] = [
            ("filter=nosuch/f", 404, ["error": "not_found", "reason": "missing"]),
            ("filter=app/nosuch", 404, ["error": "not_found", "reason": "missing json key: nosuch"]),
            ("filter=nofilters/f", 404, ["error": "not_found", "reason": "missing json key: filters"]),
            ("filter=_view&view=nosuch/v", 404, ["error": "not_found", "reason": "missing"]),
            ("filter=_view&view=app/nosuch", 404, ["error": "not_found", "reason": "missing json key: nosuch"]),
            ("filter=_view&view=nofilters/v", 404, ["error": "not_found", "reason": "missing json key: views"]),
        ]
        for (query, status, body) in cases {
            let response = try server.json("GET", "/db/_changes?\(query)")
            #expect(response.status == status, "\(query)")
            #expect(response.json == body, "\(query)")
        }
        #expect(try server.json("GET", "/db/_changes?filter=_view&view=app/v").status == 200)
        for feed in ["longpoll", "continuous", "eventsource"] {
            #expect(try server.json("GET", "/db/_changes?feed=\(feed)&filter=app/nosuch").status == 404)
        }
    }
}


/// Whether each kind of request, made a few times at once on connections of their own, was
/// answered (as expected) at least once while `slow` was still running. Several at once,
/// because the listener hands each connection to one of its threads by its descriptor, and
/// one of those threads is the one held by the slow request.
func answeredWhile<Value: Sendable>(_ slow: Background<Value>, _ kinds: [@Sendable () throws -> Bool],
                                    copies: Int = 3) -> Bool {
    let attempts = kinds.map { kind in (0..<copies).map { _ in Background { try kind() } } }
    let deadline = Date().addingTimeInterval(5)
    while Date() < deadline && !slow.isFinished {
        let answered = attempts.allSatisfy { copies in copies.contains { $0.isFinished && ((try? $0.value()) ?? false) } }
        if answered { return !slow.isFinished }
        Thread.sleep(forTimeInterval: 0.01)
    }
    return false
}

/// A blocking request (the test HTTP client) on a thread of its own, started at once: a
/// request that waits seconds holds none of the few threads that run Swift tasks, and
/// needs none to start.
final class Background<Value: Sendable>: @unchecked Sendable {
    private let done = DispatchSemaphore(value: 0)
    private let lock = NSLock()
    private var result: Result<Value, Error>?

    init(_ work: @escaping @Sendable () throws -> Value) {
        Thread {
            let outcome = Result { try work() }
            self.lock.withLock { self.result = outcome }
            self.done.signal()
        }.start()
    }

    var isFinished: Bool { lock.withLock { result != nil } }

    func value() throws -> Value {
        done.wait()
        done.signal()
        return try lock.withLock { result! }.get()
    }
}
