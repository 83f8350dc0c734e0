import CouchCore
import CouchTestSupport
import Foundation
import Testing

/// A few thousand hostile requests against a real server: malformed and deeply nested
/// JSON, invalid UTF-8, a wrong type in every field of every route's body, hostile query
/// values, paths and IDs, broken multipart bodies, odd headers. Each must be answered with
/// a 4xx and CouchDB's error JSON (or succeed, when the request turned out valid), never a
/// 5xx; a refused write must leave the database as it was; the server must stay up.
@Suite struct HTTPFuzzTests {
    struct Outcome {
        var sent = 0
        var findings: [String] = []
        var statuses: [Int: Int] = [:]
    }

    /// A body that exercises every field a route reads, valid as it stands.
    static let templates: [(method: String, path: String, body: String)] = [
        ("PUT", "/fuzz/doc", #"{"_id":"doc","_rev":"1-abc","_deleted":false,"_attachments":{"a.txt":{"content_type":"text/plain","data":"aGk=","revpos":1,"length":2,"stub":false,"follows":false,"encoding":"identity","digest":"md5-x"}},"_revisions":{"start":1,"ids":["abc"]},"x":1}"#),
        ("POST", "/fuzz", #"{"_id":"posted","x":{"y":[1,2]},"_deleted":false}"#),
        ("POST", "/fuzz/_bulk_docs", #"{"docs":[{"_id":"b1","_rev":"1-abc","_revisions":{"start":1,"ids":["abc"]},"_attachments":{"a":{"content_type":"text/plain","data":"aGk="}}},{"_id":"b2","_deleted":true}],"new_edits":false}"#),
        ("POST", "/fuzz/_all_docs", #"{"keys":["a","b"]}"#),
        ("POST", "/fuzz/_changes?filter=_doc_ids", #"{"doc_ids":["a","b"]}"#),
        ("POST", "/fuzz/_changes?filter=_selector", #"{"selector":{"x":{"$gt":1},"$or":[{"a":{"$regex":"^a"}},{"b":{"$in":[1,2]}}],"c":{"$elemMatch":{"$eq":1}}}}"#),
        ("POST", "/fuzz/_revs_diff", #"{"doc":["1-abc","2-def"]}"#),
        ("POST", "/fuzz/_missing_revs", #"{"doc":["1-abc"]}"#),
        ("POST", "/fuzz/_bulk_get?revs=true", #"{"docs":[{"id":"doc","rev":"1-abc","atts_since":["1-abc"]}]}"#),
        ("POST", "/fuzz/_purge", #"{"nodoc":["1-abc"]}"#),
        ("PUT", "/fuzz/_security", #"{"admins":{"names":[],"roles":[]},"members":{"names":[],"roles":[]}}"#),
        ("PUT", "/fuzz/_revs_limit", "1000"),
        ("PUT", "/fuzz/_purged_infos_limit", "1000"),
        ("PUT", "/fuzz/_local/fuzz", #"{"_rev":"0-1","history":[{"session_id":"x"}]}"#),
        ("PUT", "/fuzz/_design/fuzz", #"{"language":"javascript","filters":{"f":"function(doc, req) { return true; }"},"validate_doc_update":"function(newDoc, oldDoc, userCtx) {}","views":{"v":{"map":"function(doc) {}"}}}"#),
        ("POST", "/_replicate", #"{"source":"fuzz","target":"fuzzcopy","create_target":false,"doc_ids":["a"],"since_seq":0,"worker_batch_size":10,"checkpoint_interval":1000,"use_checkpoints":true}"#),
        ("POST", "/_session", #"{"name":"nobody","password":"nothing"}"#),
        ("POST", "/_dbs_info", #"{"keys":["fuzz"]}"#),
        ("PUT", "/_node/_local/_config/fuzz/key", #""value""#),
        ("PUT", "/_replicator/fuzz", #"{"source":"fuzz","target":"fuzzcopy","continuous":false,"create_target":false,"filter":"fuzz/f","query_params":{"a":"b"}}"#),
        ("PUT", "/_users/org.couchdb.user:fuzz", #"{"name":"fuzz","type":"user","roles":[],"password":"p"}"#),
        ("COPY", "/fuzz/source", ""),
    ]

    static let wrongValues = [
        "null", "true", "false", "0", "-1", "1.5", "1e400", "-1e400", "123456789012345678901234567890",
        #""""#, #""x""#, #""\u0000""#, #""\ud800""#, "[]", "[null]", "{}", #"{"":{}}"#,
        String(repeating: "[", count: 600) + String(repeating: "]", count: 600),
    ]

    static let malformedBodies: [[UInt8]] = [
        "", " ", "{", "}", "[", "{\"a\"", "{\"a\":}", "{\"a\":1,}", "[1,]", "{'a':1}", "nul", "tru", "01", "1.", "-",
        "{\"a\":1}{", "{\"a\":1} x", "\"\\x\"", "\"\\u12\"", "\"\u{0001}\"", "{\"a\":NaN}", "{\"a\":Infinity}",
        "{\"__proto__\":1,\"__proto__\":2}", "{\"a\":\"" + String(repeating: "\\", count: 3) + "\"}",
    ].map { Array($0.utf8) } + [
        [0xFF, 0xFE], [0x7B, 0x22, 0x61, 0x22, 0x3A, 0x22, 0xC3, 0x28, 0x22, 0x7D],       // {"a":"\xc3(" }
        [0x7B, 0x22, 0xED, 0xA0, 0x80, 0x22, 0x3A, 0x31, 0x7D],                           // a surrogate encoded in UTF-8
        [0x7B, 0x22, 0x61, 0x22, 0x3A, 0x22, 0xF4, 0x90, 0x80, 0x80, 0x22, 0x7D],         // past U+10FFFF
        [0x7B, 0x22, 0x61, 0x22, 0x3A, 0x22, 0xC0, 0xAF, 0x22, 0x7D],                     // overlong '/'
        Array((String(repeating: "[", count: 200_000)).utf8),
        Array((String(repeating: "{\"a\":", count: 100_000) + "1" + String(repeating: "}", count: 100_000)).utf8),
        Array(("[" + String(repeating: "1,", count: 200_000) + "1]").utf8),
        Array(("{\"a\":\"" + String(repeating: "\\ud800", count: 1000) + "\"}").utf8),
        Array("{\"a\":1e99999999999999999999}".utf8),
        Array("{\"a\":-0.0000000000000000000000000000000000000000001e-99999999999}".utf8),
    ]

    static let hostileQueryValues = [
        "", "-1", "-9223372036854775808", "9223372036854775808", "99999999999999999999999", "1e999", "abc", "%ff",
        "%00", "%", "%2", "%22", "[", "%5B1%2C", "{", "null", "%22%5Cud800%22", "0x10", "+1", "1.5",
    ]

    static let queryRoutes: [(path: String, parameters: [String])] = [
        ("/fuzz/_all_docs", ["limit", "skip", "startkey", "endkey", "key", "keys", "descending", "include_docs",
                             "inclusive_end", "update_seq", "start_key", "end_key", "startkey_docid", "conflicts"]),
        ("/fuzz/_changes", ["since", "limit", "descending", "include_docs", "style", "heartbeat", "timeout", "filter",
                            "doc_ids", "selector", "conflicts", "attachments", "seq_interval", "last-event-id"]),
        ("/fuzz/source", ["rev", "revs", "revs_info", "open_revs", "latest", "conflicts", "deleted_conflicts",
                          "local_seq", "meta", "attachments", "atts_since", "att_encoding_info"]),
        ("/fuzz/source/a.txt", ["rev"]),
        ("/_all_dbs", ["limit", "skip", "startkey", "endkey", "descending"]),
        ("/_uuids", ["count"]),
        ("/_db_updates", ["since", "limit", "descending", "heartbeat", "timeout"]),
        ("/_scheduler/jobs", ["limit", "skip"]),
        ("/_scheduler/docs", ["limit", "skip"]),
        ("/fuzz/_purged_infos", ["limit"]),
    ]

    static let hostilePaths = [
        "/%", "/%zz", "/%00", "/fuzz/%", "/fuzz/%00", "/fuzz/%ff%fe", "/fuzz/..%2F..%2Fetc", "/fuzz/_local/",
        "/fuzz/_design/", "/fuzz/_design", "/fuzz/_local", "/fuzz//", "//", "/fuzz/doc/", "/fuzz/_design/x/_view/",
        "/fuzz/_design/x/_view/v", "/fuzz/_design/x/_show/s/y", "/fuzz/_nonsense", "/_nonsense", "/fuzz/_all_docs/x",
        "/fuzz/" + String(repeating: "x", count: 8000), "/" + String(repeating: "a", count: 300), "/Fuzz", "/fuzz%2F",
        "/fuzz/_local%2F", "/fuzz/_design%2F", "/_node/nobody/_config", "/_node/_local/_config/a/b/c",
        "/_node/_local/_stats/%ff", "/_scheduler/docs/%ff/x", "/_scheduler/docs/_replicator/x/_pending",
        "/fuzz/%5Fx", "/fuzz/_x", "/fuzz/source/_x", "/fuzz/source/" + String(repeating: "%ff", count: 100),
        "/fuzz?%", "/fuzz/source?rev", "/fuzz/source?=&&=", "/fuzz/source#frag", "/fuzz/\u{7F}",
    ]

    @Test func hostileRequestsGetCouchDBErrors() throws {
        let server = try TestServer()
        defer { server.stop() }
        try server.createDatabase("fuzz")
        try server.createDatabase("fuzzcopy")
        let sourceRev = try server.put("fuzz", "source", #"{"x":1,"_attachments":{"a.txt":{"content_type":"text/plain","data":"aGk="}}}"#)
        let connection = try HTTPTestConnection(port: server.port, timeout: 60)
        defer { connection.close() }
        var outcome = Outcome()

        func state() -> String {
            let info = (try? connection.request("GET", "/fuzz")).flatMap { try? JSONValue.parse($0.body) }
            return "\(info?["update_seq"]?.stringValue ?? "?") \(info?["doc_count"]?.intValue ?? -1)"
        }
        func send(_ method: String, _ path: String, headers: [(String, String)] = [], body: [UInt8]?, label: String) {
            let before = method == "GET" || method == "HEAD" ? nil : state()
            outcome.sent += 1
            let response: HTTPTestResponse
            do {
                response = try connection.request(method, path, headers: headers, body: body)
            } catch {
                // Closing the connection is an answer for some framing errors; the server must still be up.
                if (try? httpRequest(port: server.port, "GET", "/_up"))?.status != 200 {
                    outcome.findings.append("\(label): server down after \(error)")
                }
                return
            }
            outcome.statuses[response.status, default: 0] += 1
            let text = String(response.text.prefix(200))
            // CouchDB answers an invalid `_security` object 500 `error` (every shard refused it): so does Couchette.
            let expectedServerError = response.status == 500 && path.hasSuffix("/_security")
                && (try? JSONValue.parse(response.body))?["error"] == "error"
            if response.status >= 500 && response.status != 501 && !expectedServerError {
                outcome.findings.append("\(label): \(response.status) \(text)")
            }
            if response.status >= 400, method != "HEAD" {
                let json = try? JSONValue.parse(response.body)
                if json?["error"]?.stringValue == nil || json?["reason"]?.stringValue == nil {
                    outcome.findings.append("\(label): \(response.status) without CouchDB's error JSON: \(text)")
                }
            }
            if let before, response.status >= 400, state() != before {
                outcome.findings.append("\(label): refused with \(response.status) but the database changed (\(before) → \(state()))")
            }
        }
        let json = [("Content-Type", "application/json")]

        // A wrong type in every field, at every depth, of every route's body.
        for template in Self.templates where !template.body.isEmpty {
            let document = try JSONValue.parse(Array(template.body.utf8))
            for (path, mutated) in Self.mutations(of: document) {
                let path2 = template.path.replacingOccurrences(of: "source", with: "source?rev=\(sourceRev)")
                send(template.method, path2, headers: json, body: Array(mutated.utf8), label: "\(template.method) \(template.path) \(path)")
            }
        }
        // Malformed JSON on every route that reads a body.
        for template in Self.templates {
            for body in Self.malformedBodies {
                send(template.method, template.path, headers: json, body: body,
                     label: "\(template.method) \(template.path) malformed \(String(decoding: body.prefix(40), as: UTF8.self))")
            }
        }
        // Hostile query values for every parameter of the reading routes.
        for route in Self.queryRoutes {
            for parameter in route.parameters {
                for value in Self.hostileQueryValues {
                    send("GET", "\(route.path)?\(parameter)=\(value)", body: nil, label: "GET \(route.path)?\(parameter)=\(value)")
                }
            }
        }
        // Hostile paths and IDs with every method.
        for path in Self.hostilePaths {
            // (DELETE /fuzz?junk deletes the database, rightly: not a mistake to look for.)
            for method in ["GET", "PUT", "POST", "DELETE", "COPY", "HEAD"] where !(method == "DELETE" && path.hasPrefix("/fuzz?")) {
                send(method, path, headers: json + [("Destination", "x")], body: method == "PUT" || method == "POST" ? Array("{}".utf8) : nil,
                     label: "\(method) \(path.prefix(60))")
            }
        }
        // Hostile headers.
        for (headers, method, path) in Self.hostileHeaders(sourceRev: sourceRev) {
            send(method, path, headers: headers, body: method == "PUT" || method == "POST" ? Array(#"{"a":1}"#.utf8) : nil,
                 label: "\(method) \(path) \(headers.map { "\($0.0): \($0.1.prefix(30))" })")
        }
        // Broken multipart bodies.
        for (index, (contentType, body)) in Self.brokenMultipart().enumerated() {
            send("PUT", "/fuzz/multi\(index)", headers: [("Content-Type", contentType)], body: body, label: "multipart #\(index)")
            send("PUT", "/fuzz/source?rev=\(sourceRev)", headers: [("Content-Type", contentType)], body: body,
                 label: "multipart on existing #\(index)")
        }

        print("HTTP fuzz: \(outcome.sent) requests, statuses \(outcome.statuses.sorted { $0.key < $1.key })")
        #expect(outcome.sent > 2000)
        // Most requests must be refused, or the mutations are not reaching the routes' checks.
        #expect(outcome.statuses.filter { $0.key >= 400 }.values.reduce(0, +) > outcome.sent / 2)
        #expect(outcome.findings.isEmpty, "\(outcome.findings.count) findings of \(outcome.sent):\n\(outcome.findings.prefix(40).joined(separator: "\n"))")
        // Still up, and after a compaction no attachment body is left that no leaf revision
        // refers to (a refused write removes what it staged).
        #expect(try server.request("GET", "/_up").status == 200)
        #expect(try server.request("POST", "/fuzz/_compact", body: "").status == 202)
        var referenced = Set<String>()
        for row in try server.json("GET", "/fuzz/_all_docs").json["rows"]?.arrayValue ?? [] {
            guard let id = row["id"]?.stringValue else { continue }
            let escaped = id.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? id
            let leaves = try server.request("GET", "/fuzz/\(escaped)?open_revs=all", headers: [("Accept", "application/json")])
            for leaf in (try? JSONValue.parse(leaves.body).arrayValue) ?? [] {
                for (_, stub) in leaf["ok"]?["_attachments"]?.objectValue ?? JSONObject() {
                    if let digest = stub["digest"]?.stringValue { referenced.insert(digest) }
                }
            }
        }
        // The compaction runs after its 202: wait for its outcome.
        _ = waitFor { DatabaseFiles.blobs(of: "fuzz", in: server.directory).stored.count == referenced.count }
        let blobs = DatabaseFiles.blobs(of: "fuzz", in: server.directory)
        #expect(blobs.staging.isEmpty)
        #expect(blobs.stored.count == referenced.count, "\(blobs.stored.count) bodies stored, \(referenced.count) referenced")
    }

    private func waitFor(_ condition: () -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(60)
        while Date() < deadline {
            if condition() { return true }
            usleep(20_000)
        }
        return false
    }

    /// Each field (at every depth) replaced by each wrong value, as JSON text.
    static func mutations(of value: JSONValue) -> [(String, String)] {
        var results: [(String, String)] = []
        func walk(_ node: JSONValue, _ path: String, _ rebuild: @escaping (String) -> String) {
            for wrong in wrongValues { results.append((path + "=" + wrong.prefix(20), rebuild(wrong))) }
            if let object = node.objectValue {
                for (key, child) in object {
                    walk(child, path + "." + key) { replacement in
                        rebuild(Self.object(object, replacing: key, with: replacement))
                    }
                }
            } else if let array = node.arrayValue {
                for (index, child) in array.enumerated() {
                    walk(child, path + "[\(index)]") { replacement in
                        var parts = array.map { $0.serializedString() }
                        parts[index] = replacement
                        return rebuild("[" + parts.joined(separator: ",") + "]")
                    }
                }
            }
        }
        walk(value, "") { $0 }
        return results
    }

    static func object(_ object: JSONObject, replacing key: String, with replacement: String) -> String {
        "{" + object.map { name, child in
            JSONValue.string(name).serializedString() + ":" + (name == key ? replacement : child.serializedString())
        }.joined(separator: ",") + "}"
    }

    static func hostileHeaders(sourceRev: String) -> [([(String, String)], String, String)] {
        let long = String(repeating: "x", count: 12_000)
        var cases: [([(String, String)], String, String)] = []
        for (method, path) in [("PUT", "/fuzz/h"), ("POST", "/fuzz/_bulk_docs"), ("GET", "/fuzz/source"), ("POST", "/_session")] {
            cases += [
                ([], method, path),
                ([("Content-Type", "text/plain")], method, path),
                ([("Content-Type", "application/json; charset=latin1")], method, path),
                ([("Content-Type", "multipart/related")], method, path),
                ([("Content-Type", "multipart/related; boundary=")], method, path),
                ([("Content-Type", "application/x-www-form-urlencoded")], method, path),
                ([("Content-Type", long)], method, path),
                ([("Content-Type", "application/json"), ("Accept", "text/html;q=x, */*;q=-1")], method, path),
                ([("Content-Type", "application/json"), ("Authorization", "Basic !!!")], method, path),
                ([("Content-Type", "application/json"), ("Authorization", "Basic " + Data("nocolon".utf8).base64EncodedString())], method, path),
                ([("Content-Type", "application/json"), ("Authorization", "Basic " + Data([0xFF, 0x3A, 0xFE]).base64EncodedString())], method, path),
                ([("Content-Type", "application/json"), ("Authorization", "Bearer x")], method, path),
                ([("Content-Type", "application/json"), ("Cookie", "AuthSession=%ff%fe")], method, path),
                ([("Content-Type", "application/json"), ("Cookie", "AuthSession=" + long)], method, path),
                ([("Content-Type", "application/json"), ("If-Match", "\"garbage")], method, path),
                ([("Content-Type", "application/json"), ("If-None-Match", "\u{7F}")], method, path),
                ([("Content-Type", "application/json"), ("X-Couch-Full-Commit", "maybe")], method, path),
                ([("Content-Type", "application/json"), ("Content-Encoding", "gzip")], method, path),
                ([("Content-Type", "application/json"), ("Origin", "null")], method, path),
            ]
        }
        for range in ["bytes=", "bytes=5-1", "bytes=-0", "bytes=99999999999999999999-", "bytes=0-99999999999999999999",
                      "bytes=-99999999999999999999", "items=0-1", "bytes=0-1,1-2,a-b", "bytes=--1"] {
            cases.append(([("Range", range)], "GET", "/fuzz/source/a.txt"))
        }
        for destination in ["", "%", "%ff", "_local/", "_design/", "x?rev=", "x?rev=garbage", "x?rev=1-abc", "_x", long] {
            cases.append(([("Destination", destination)], "COPY", "/fuzz/source"))
        }
        cases.append(([("If-Match", "garbage")], "DELETE", "/fuzz/source"))
        cases.append(([("If-Match", sourceRev + "x")], "DELETE", "/fuzz/source"))
        return cases
    }

    /// `multipart/related` bodies broken in every part of their framing.
    static func brokenMultipart() -> [(String, [UInt8])] {
        let type = #"multipart/related; boundary="b""#
        let json = #"{"_attachments":{"a.bin":{"follows":true,"content_type":"application/octet-stream","length":5}}}"#
        func body(_ text: String) -> [UInt8] { Array(text.utf8) }
        return [
            (type, body("")),
            (type, body("--b--")),
            (type, body("--b\r\n\r\n" + json)),                                              // no closing delimiter
            (type, body("--b\r\nContent-Type: application/json\r\n\r\n" + json + "\r\n--b--")), // attachment part missing
            (type, body("--b\r\n\r\n" + json + "\r\n--b\r\n\r\nhel")),                       // truncated attachment
            (type, body("--b\r\n\r\n" + json + "\r\n--b\r\n\r\nhello world\r\n--b--")),      // longer than declared
            (type, body("--b\r\n\r\n" + json + "\r\n--b\r\n\r\nhi\r\n--b--")),                // shorter than declared
            (type, body("--b\r\n\r\n{not json\r\n--b\r\n\r\nhello\r\n--b--")),
            (type, body("--b\r\n\r\n[1,2]\r\n--b\r\n\r\nhello\r\n--b--")),
            (type, body("--b\r\n\r\n" + json + "\r\n--b\r\n\r\nhello\r\n--b\r\n\r\nextra\r\n--b--")),
            (type, body("--c\r\n\r\n" + json + "\r\n--c\r\n\r\nhello\r\n--c--")),               // another boundary
            (type, body("--b\r\nContent-Type\r\n\r\n" + json + "\r\n--b\r\n\r\nhello\r\n--b--")), // header without colon
            (type, body("--b\r\n" + String(repeating: "X-A: b\r\n", count: 5000) + "\r\n" + json + "\r\n--b--")),
            (type, body("--b\r\n\r\n" + #"{"_attachments":{"a.bin":{"follows":true,"length":-5}}}"# + "\r\n--b\r\n\r\nhello\r\n--b--")),
            (type, body("--b\r\n\r\n" + #"{"_attachments":{"a.bin":{"follows":true,"length":99999999999999999999}}}"# + "\r\n--b\r\n\r\nhello\r\n--b--")),
            (type, body("--b\r\n\r\n" + #"{"_attachments":{"a.bin":{"follows":"yes"}}}"# + "\r\n--b\r\n\r\nhello\r\n--b--")),
            (type, body("--b\r\n\r\n" + #"{"_attachments":{"a.bin":{"follows":true,"content_type":"a\r\nb","length":5}}}"# + "\r\n--b\r\n\r\nhello\r\n--b--")),
            (#"multipart/related; boundary="""#, body("--\r\n\r\n{}\r\n----")),
            ("multipart/related; boundary=" + String(repeating: "b", count: 5000), body("--b--")),
            ("multipart/mixed; boundary=b", body("--b\r\n\r\n" + json + "\r\n--b\r\n\r\nhello\r\n--b--")),
            (type, [0x2D, 0x2D, 0x62, 0x0D, 0x0A, 0x0D, 0x0A, 0xFF, 0xFE, 0x0D, 0x0A, 0x2D, 0x2D, 0x62, 0x2D, 0x2D]),
        ]
    }
}
