import CouchCore
import CouchTestSupport
import Foundation
import Testing

/// Requests that once killed or misled the server, sent to the real `couchette` binary:
/// each must get CouchDB's answer, and the server must still answer `/_up` at once.
@Suite struct HostileRequestTests {
    static let intMax = "9223372036854775807"

    /// The binary on a fresh data directory, with a few helpers for these tests.
    final class Target: @unchecked Sendable {
        let process: ServerProcess
        init(arguments: [String] = [], directory: String? = nil, environment: [String: String] = [:]) throws {
            process = try ServerProcess(arguments: arguments, directory: directory, environment: environment)
        }
        deinit { process.stop() }

        func request(_ method: String, _ path: String, headers: [(String, String)] = [],
                     body: String? = nil) throws -> HTTPTestResponse {
            var all = headers
            if body != nil, !headers.contains(where: { $0.0.lowercased() == "content-type" }) {
                all.append(("Content-Type", "application/json"))
            }
            return try httpRequest(port: process.port, method, path, headers: all, body: body.map { Array($0.utf8) })
        }

        func json(_ method: String, _ path: String, headers: [(String, String)] = [],
                  body: String? = nil) throws -> (status: Int, json: JSONValue) {
            let response = try request(method, path, headers: headers, body: body)
            return (response.status, try JSONValue.parse(response.body))
        }

        /// The server is alive and answers at once.
        func expectUp(sourceLocation: SourceLocation = #_sourceLocation) {
            let connection = try? HTTPTestConnection(port: process.port, timeout: 2)
            let up = try? connection?.request("GET", "/_up")
            connection?.close()
            #expect(up?.status == 200, "the server no longer answers /_up", sourceLocation: sourceLocation)
            #expect(process.process.isRunning, "the server died", sourceLocation: sourceLocation)
        }
    }

    @Test func skipNearIntMaxListsNothing() throws {
        let server = try Target()
        #expect(try server.request("PUT", "/db").status == 201)
        #expect(try server.request("PUT", "/db/a", body: "{}").status == 201)
        let all = try server.json("GET", "/db/_all_docs?skip=\(Self.intMax)&startkey=%22b%22")
        #expect(all.status == 200)
        #expect(all.json["rows"] == [])
        #expect(all.json["total_rows"] == 1)
        server.expectUp()
        let design = try server.json("GET", "/db/_design_docs?skip=\(Self.intMax)")
        #expect(design.status == 200)
        #expect(design.json["rows"] == [])
        server.expectUp()
        let posted = try server.json("POST", "/db/_all_docs?skip=\(Self.intMax)", body: #"{"keys":["a"]}"#)
        #expect(posted.status == 200)
        #expect(posted.json["rows"] == [])
        // Beyond Int64, or negative: CouchDB's query_parse_error.
        let huge = try server.json("GET", "/db/_all_docs?skip=99999999999999999999")
        #expect(huge.status == 400)
        #expect(huge.json == ["error": "query_parse_error", "reason": #"Invalid value for integer: "99999999999999999999""#])
        let negative = try server.json("GET", "/db/_all_docs?limit=-1")
        #expect(negative.json == ["error": "query_parse_error", "reason": #"Invalid value for positive integer: "-1""#])
        #expect(try server.json("GET", "/_all_dbs?skip=\(Self.intMax)&limit=\(Self.intMax)").json == [])
        server.expectUp()
    }

    @Test func replicationSettingsAreRangeChecked() throws {
        let server = try Target()
        #expect(try server.request("PUT", "/source").status == 201)
        let hostile: [(String, String)] = [
            ("checkpoint_interval", "18500000000000"), ("worker_batch_size", Self.intMax),
            ("worker_processes", Self.intMax), ("worker_processes", "2000000"), ("http_connections", Self.intMax),
            ("connection_timeout", "18500000000000"), ("retries_per_request", Self.intMax), ("worker_processes", "0"),
        ]
        for (name, value) in hostile {
            let answer = try server.json("POST", "/_replicate",
                                         body: #"{"source":"source","target":"target","create_target":true,"\#(name)":\#(value)}"#)
            #expect(answer.status == 400, "\(name): \(value)")
            #expect(answer.json["error"] == "bad_request")
            #expect(answer.json["reason"]?.stringValue?.contains(name) == true)
            server.expectUp()
        }
        // Nothing was started or created by the refused requests.
        #expect(try server.request("GET", "/target").status == 404)
        #expect(try server.json("GET", "/_active_tasks").json == [])
        // The largest accepted values still replicate.
        let accepted = try server.json("POST", "/_replicate", body: #"""
            {"source":"source","target":"target","create_target":true,"checkpoint_interval":4294967295,
             "worker_processes":128,"worker_batch_size":100000,"connection_timeout":4294967295}
            """#)
        #expect(accepted.status == 200)
        #expect(accepted.json["ok"] == true)
        if Sanitizer.memoryFiguresAreMeaningful { #expect((server.process.status("VmHWM") ?? 0) < 500_000) }
        server.expectUp()
    }

    @Test func forgedSessionCookieWithFarFutureTimeIsIgnored() throws {
        let server = try Target(arguments: ["--admin", "admin:secret"])
        for time in ["7FFFFFFFFFFFFFFF", "7FFFFFFFFFFFFFF0", "-8000000000000000", "FFFFFFFFFFFFFFFFFFFF"] {
            let value = Data("admin:\(time):forged".utf8).base64EncodedString()
                .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
                .replacingOccurrences(of: "=", with: "")
            let session = try server.json("GET", "/_session", headers: [("Cookie", "AuthSession=\(value)")])
            #expect(session.status == 200, "time \(time)")
            #expect(session.json["userCtx"]?["name"] == .null)
            server.expectUp()
        }
    }

    @Test func revisionGenerationAtIntMaxCannotTrapTheNextEdit() throws {
        let server = try Target()
        #expect(try server.request("PUT", "/db").status == 201)
        let replicated = try server.json("PUT", "/db/doc?new_edits=false", body: #"{"_rev":"\#(Self.intMax)-abc"}"#)
        #expect(replicated.status == 201)
        let edit = try server.json("PUT", "/db/doc", body: #"{"_rev":"\#(Self.intMax)-abc","n":1}"#)
        #expect(edit.status == 400)
        #expect(edit.json["error"] == "bad_request")
        #expect(try server.json("GET", "/db/doc").json["_rev"]?.stringValue == "\(Self.intMax)-abc")
        let deletion = try server.request("DELETE", "/db/doc?rev=\(Self.intMax)-abc")
        #expect(deletion.status == 400)
        // One past Int64 is not a revision at all.
        #expect(try server.json("GET", "/db/doc?rev=9223372036854775808-abc").status == 400)
        server.expectUp()
    }

    @Test func changesFeedNumbersNearIntMax() throws {
        let server = try Target()
        #expect(try server.request("PUT", "/db").status == 201)
        #expect(try server.request("PUT", "/db/a", body: "{}").status == 201)
        // CouchDB's form of the largest sequence is read (and echoed, as CouchDB does); as a bare
        // number it is past the last change, which CouchDB's answer to a bare number refuses.
        let sequence = UpdateSequence(Int(Self.intMax)!).description
        let since = try server.json("GET", "/db/_changes?since=\(sequence)&limit=\(Self.intMax)")
        #expect(since.status == 200)
        #expect(since.json["results"] == [])
        #expect(try server.json("GET", "/db/_changes?since=\(Self.intMax)&limit=\(Self.intMax)").status == 400)
        #expect(try server.json("GET", "/db/_changes?since=99999999999999999999").status == 400)
        // A waiting feed with the largest heartbeat and timeout: it waits, and a write wakes it.
        let feed = try HTTPTestConnection(port: server.process.port, timeout: 5)
        defer { feed.close() }
        _ = try feed.startStreaming("GET", "/db/_changes?feed=longpoll&since=now&heartbeat=\(Self.intMax)&timeout=\(Self.intMax)")
        server.expectUp()
        #expect(try server.request("PUT", "/db/b", body: "{}").status == 201)
        let body = try JSONValue.parse(feed.readToEnd(timeout: 5))
        #expect(body["results"]?.arrayValue?.first?["id"] == "b")
        server.expectUp()
    }

    @Test func uuidCountIsBounded() throws {
        let server = try Target()
        let many = try server.json("GET", "/_uuids?count=\(Self.intMax)")
        #expect(many.status == 400)
        #expect(many.json == ["error": "bad_request", "reason": "count parameter too large"])
        server.expectUp()
    }
}

/// Password checks are the cheapest way to make the server work: bounded in cost and in number.
@Suite struct HostileLoginTests {
    static let admin = basicAuthorization("admin", "secret")

    static func userDocument(_ name: String, iterations: Int) -> String {
        #"{"name":"\#(name)","type":"user","roles":[],"password_scheme":"pbkdf2","pbkdf2_prf":"sha256","derived_key":"00","salt":"abc","iterations":\#(iterations)}"#
    }

    @Test func onlyAdminsChooseHashesAndIterationsAreBounded() throws {
        let server = try HostileRequestTests.Target(arguments: ["--admin", "admin:secret"])
        // Anonymous sign-up with its own hash: refused, nothing written.
        let signUp = try server.json("PUT", "/_users/org.couchdb.user:evil", body: Self.userDocument("evil", iterations: 1_000_000_000_000_000))
        #expect(signUp.status == 403)
        #expect(signUp.json["error"] == "forbidden")
        #expect(try server.request("GET", "/_users/org.couchdb.user:evil", headers: [Self.admin]).status == 404)
        // Signing up with a password is still open, and the server chooses the hash.
        #expect(try server.request("PUT", "/_users/org.couchdb.user:bob", body: #"{"name":"bob","type":"user","roles":[],"password":"pw"}"#).status == 201)
        let bob = try server.json("GET", "/_users/org.couchdb.user:bob", headers: [Self.admin]).json
        #expect(bob["iterations"] == 600_000)
        // Bob cannot swap in his own iterations either.
        var edited = try #require(bob.objectValue)
        edited["iterations"] = 1_000_000_000_000
        #expect(try server.json("PUT", "/_users/org.couchdb.user:bob", headers: [basicAuthorization("bob", "pw")],
                                body: JSONValue.object(edited).serializedString()).status == 403)
        // An admin may; a login against a hash beyond max_iterations is refused at once, as CouchDB does.
        #expect(try server.request("PUT", "/_users/org.couchdb.user:evil", headers: [Self.admin],
                                   body: Self.userDocument("evil", iterations: 1_000_000_000_000_000)).status == 201)
        let started = Date()
        let login = try server.json("POST", "/_session", body: #"{"name":"evil","password":"x"}"#)
        #expect(login.status == 403)
        #expect(login.json == ["error": "forbidden", "reason": "Iteration count is too high for this server"])
        #expect(Date().timeIntervalSince(started) < 5)
        server.expectUp()
    }

    @Test func aLoginFloodLeavesThreadsForOtherRequests() throws {
        let server = try HostileRequestTests.Target(arguments: ["--admin", "admin:secret"])
        // A few tenths of a second of PBKDF2 per attempt.
        #expect(try server.request("PUT", "/_users/org.couchdb.user:slow", headers: [Self.admin],
                                   body: Self.userDocument("slow", iterations: 300_000)).status == 201)
        let statuses = NSLock()
        nonisolated(unsafe) var answered: [Int] = []
        let group = DispatchGroup()
        for _ in 0..<48 {
            group.enter()
            Thread {
                let status = (try? server.request("POST", "/_session", body: #"{"name":"slow","password":"wrong"}"#).status) ?? 0
                statuses.withLock { answered.append(status) }
                group.leave()
            }.start()
        }
        Thread.sleep(forTimeInterval: 0.3)
        let started = Date()
        server.expectUp()
        // Unbounded, 48 checks of 300,000 iterations would hold every thread for a minute;
        // the bound is loose so that a loaded machine cannot fail it.
        #expect(Date().timeIntervalSince(started) < 5)
        #expect(group.wait(timeout: .now() + 60) == .success)
        // Each was checked (and failed) or, beyond the checks allowed at once, refused with 503.
        let final = statuses.withLock { answered }
        #expect(final.count == 48)
        #expect(final.allSatisfy { $0 == 401 || $0 == 503 })
        #expect(final.contains(401))
        server.expectUp()
    }
}
