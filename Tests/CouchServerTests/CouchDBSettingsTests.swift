import CouchCore
import CouchServer
import CouchTestSupport
import Foundation
import Testing

/// What CouchDB 3.4 clients read of the server (`GET /`, headers on every answer) and the
/// CouchDB settings that change answers: `[uuids]`, `[chttpd] decode_plus_to_space`,
/// `max_http_request_size`, the node's name, and `_config` itself.
@Suite struct CouchDBSettingsTests {
    static func server(_ entries: [(String, String, String)] = []) throws -> TestServer {
        var configuration = ServerConfiguration.testing()
        for (section, key, value) in entries {
            configuration.otherEntries.append(.init(section: section, key: key, value: value))
        }
        return try TestServer(configuration: configuration)
    }

    @Test func welcomeNamesTheCouchDBVersionAndFeatures() throws {
        let server = try Self.server()
        defer { server.stop() }
        let response = try server.request("GET", "/")
        let welcome = try JSONValue.parse(response.body)
        #expect(welcome["version"] == "3.4.3")
        #expect(welcome["features"] == ["access-ready", "partitioned", "scheduler"])
        // Clients and CouchDB's own suite check that the server says CouchDB first.
        #expect(response.header("Server")?.hasPrefix("CouchDB/3.4.3 (Couchette/") == true)
        // `access-ready`: a document's `_access` is accepted and kept as sent.
        try server.createDatabase("db")
        #expect(try server.request("PUT", "/db/doc", body: #"{"_access":["alice"],"a":1}"#).status == 201)
        #expect(try server.json("GET", "/db/doc").json["_access"] == ["alice"])
    }

    @Test func everyAnswerCarriesBodyTimeAndTheClientsRequestID() throws {
        let server = try Self.server()
        defer { server.stop() }
        try server.createDatabase("db")
        for (method, path) in [("GET", "/"), ("HEAD", "/db"), ("GET", "/db/missing"), ("GET", "/_scheduler/jobs")] {
            let response = try server.request(method, path)
            #expect(response.header("X-CouchDB-Body-Time").flatMap { Int($0) } != nil, "\(method) \(path)")
        }
        let id = "E7498DE1-B661-42FA-943D-17F890143068"
        #expect(try server.request("GET", "/", headers: [("X-Couch-Request-ID", id)]).header("X-Couch-Request-ID") == id)
        // Too long, or with other characters, it is replaced by a nonce of ours (it goes to logs).
        for given in [String(repeating: "a", count: 37), "with space", "semi;colon"] {
            let answered = try server.request("GET", "/", headers: [("X-Couch-Request-ID", given)]).header("X-Couch-Request-ID")
            #expect(answered != given)
            #expect(answered?.count == 10)
        }
    }

    @Test func uuidAlgorithms() throws {
        let server = try Self.server()
        defer { server.stop() }
        func uuids(_ count: Int) throws -> [String] {
            try server.json("GET", "/_uuids?count=\(count)").json["uuids"]?.arrayValue?.compactMap(\.stringValue) ?? []
        }
        func set(_ key: String, _ value: String) throws {
            #expect(try server.request("PUT", "/_node/_local/_config/uuids/\(key)", body: JSONValue(value).serializedString()).status == 200)
        }
        let response = try server.request("GET", "/_uuids")
        #expect(response.header("ETag")?.isEmpty == false)
        #expect(response.header("Pragma") == "no-cache")
        #expect(response.header("Cache-Control")?.contains("no-cache") == true)

        // `sequential`, CouchDB's default: 32 hex digits, in order, on one prefix.
        let sequential = try uuids(1000)
        #expect(Set(sequential).count == 1000)
        #expect(sequential.allSatisfy { $0.count == 32 })
        // (A prefix lasts at least 4,096 IDs: steps are below 0xffd, the sequence ends at 0xfff000.)
        #expect(zip(sequential, sequential.dropFirst()).allSatisfy { $0 < $1 })
        // Documents posted without an ID get them too.
        try server.createDatabase("db")
        let first = try server.json("POST", "/db", body: "{}").json["id"]?.stringValue ?? ""
        let second = try server.json("POST", "/db", body: "{}").json["id"]?.stringValue ?? ""
        #expect(first < second && first.prefix(26) == second.prefix(26))

        try set("algorithm", "utc_random")
        let utcRandom = try uuids(100)
        #expect(utcRandom.allSatisfy { $0.count == 32 })
        #expect(Set(utcRandom).count == 100)
        #expect(zip(utcRandom, utcRandom.dropFirst()).allSatisfy { $0.prefix(14) < $1.prefix(14) })
        let now = UInt64(Date().timeIntervalSince1970 * 1_000_000)
        let stamp = UInt64(utcRandom[0].prefix(14), radix: 16) ?? 0
        #expect(stamp <= now && now - stamp < 60_000_000)

        try set("algorithm", "utc_id")
        try set("utc_id_suffix", "frog")
        let utcID = try uuids(10)
        #expect(utcID.allSatisfy { $0.count == 18 && $0.hasSuffix("frog") })
        #expect(zip(utcID, utcID.dropFirst()).allSatisfy { $0 < $1 })

        try set("algorithm", "random")
        #expect(Set(try uuids(50)).count == 50)
        try set("max_count", "20")
        #expect(try server.json("GET", "/_uuids?count=21").status == 400)
        #expect(try server.request("PUT", "/_node/_local/_config/uuids/algorithm", body: #""counter""#).status == 400)
        #expect(try server.json("GET", "/_node/_local/_config/uuids/algorithm").json == "random")
    }

    @Test func plusInAPathIsASpaceUnlessConfiguredOtherwise() throws {
        let server = try Self.server()
        defer { server.stop() }
        try server.createDatabase("db")
        #expect(try server.json("PUT", "/db/test+doc", body: "{}").json["id"] == "test doc")
        #expect(try server.json("PUT", "/db/test%2Bdoc", body: "{}").json["id"] == "test+doc")
        #expect(try server.json("GET", "/db/test+doc").json["_id"] == "test doc")
        #expect(try server.request("PUT", "/_node/_local/_config/chttpd/decode_plus_to_space", body: #""false""#).status == 200)
        #expect(try server.json("PUT", "/db/a+b", body: "{}").json["id"] == "a+b")
        #expect(try server.request("PUT", "/plus+db").status == 201)
        #expect(try server.json("GET", "/_all_dbs").json.arrayValue?.contains("plus+db") == true)
    }

    @Test func maximumRequestSizeChangesWhileRunning() throws {
        let server = try Self.server()
        defer { server.stop() }
        try server.createDatabase("db")
        #expect(try server.request("PUT", "/_node/_local/_config/chttpd/max_http_request_size", body: #""16""#).status == 200)
        let refused = try server.json("POST", "/db/_changes", body: #"{"doc_ids":["doc1","doc3","doc4"]}"#)
        #expect(refused.status == 413)
        #expect(refused.json == ["error": "too_large", "reason": "the request entity is too large"])
        #expect(try server.request("DELETE", "/_node/_local/_config/chttpd/max_http_request_size").status == 200)
        #expect(try server.request("POST", "/db/_changes", body: #"{"doc_ids":["doc1","doc3","doc4"]}"#).status == 200)
    }

    @Test func theNodeIsCalledAsConfigured() throws {
        let server = try Self.server([("couchette", "node_name", "node1@127.0.0.1")])
        defer { server.stop() }
        #expect(try server.json("GET", "/_membership").json == ["all_nodes": ["node1@127.0.0.1"], "cluster_nodes": ["node1@127.0.0.1"]])
        #expect(try server.json("GET", "/_node/_local").json == ["name": "node1@127.0.0.1"])
        let config = try server.json("GET", "/_node/node1@127.0.0.1/_config")
        #expect(config.status == 200)
        #expect(config.json["couchdb"]?["database_dir"]?.stringValue == server.directory)
        #expect(try server.json("GET", "/_node/couchette@127.0.0.1/_config").status == 404)
        #expect(try server.json("GET", "/_scheduler/docs").status == 200)
        #expect(throws: ConfigurationError.self) {
            var configuration = ServerConfiguration.testing()
            configuration.otherEntries.append(.init(section: "couchette", key: "node_name", value: "no-host"))
            _ = try TestServer(configuration: configuration)
        }
    }

    @Test func aKeyReadsBackAndDeletesInTheSectionItWasSetIn() throws {
        let server = try Self.server()
        defer { server.stop() }
        // Couchette reads `WWW-Authenticate` from `[httpd]` and `[chttpd]` alike.
        #expect(try server.request("PUT", "/_node/_local/_config/chttpd/WWW-Authenticate", body: #""X-Couch-Test-Auth""#).status == 200)
        #expect(try server.json("GET", "/_node/_local/_config/chttpd/WWW-Authenticate").json == "X-Couch-Test-Auth")
        #expect(try server.json("DELETE", "/_node/_local/_config/chttpd/WWW-Authenticate").json == "X-Couch-Test-Auth")
        #expect(try server.json("GET", "/_node/_local/_config/chttpd/WWW-Authenticate").status == 404)
        #expect(try server.json("GET", "/_node/_local/_config/httpd/WWW-Authenticate").status == 404)
    }
}
