import CouchCore
import CouchServer
import CouchTestSupport
import Foundation
import Testing

/// Settings have types and ranges: a value that would crash the server, stop it from starting
/// or lock its admins out is refused by `_config` and ignored (and logged) in `local.ini`;
/// names cannot add lines to `local.ini`; paths are not set over HTTP.
@Suite struct ConfigurationRulesTests {
    static func put(_ port: Int, _ section: String, _ key: String, _ value: String) throws -> (status: Int, json: JSONValue) {
        let body = JSONValue(value).serializedString()
        let response = try httpRequest(port: port, "PUT", "/_node/_local/_config/\(section)/\(key)", body: Array(body.utf8))
        return (response.status, try JSONValue.parse(response.body))
    }

    /// Values the reports used, each refused with CouchDB's 400 and the rule as its reason.
    static let outOfRange: [(String, String, String)] = [
        ("query_server_config", "os_process_timeout", "9223372036854775807"),
        ("query_server_config", "os_process_timeout", "0"),
        ("httpd", "port", "-1"), ("chttpd", "port", "65536"),
        ("couchette", "threads", "0"), ("couchette", "threads", "100000"),
        ("couchette", "max_connections", "0"), ("couchette", "max_connections", "-5"),
        ("couchette", "idle_timeout", "-1"), ("couchette", "idle_timeout", "99999999999999999999"),
        ("couchette", "max_header_size", "0"), ("couchette", "max_url_length", "10"),
        ("couchette", "function_memory_limit", "1"),
        ("couchdb", "max_dbs_open", "0"), ("couchdb", "max_document_size", "1e6"),
        ("chttpd", "bind_address", "::1"), ("chttpd", "bind_address", "256.0.0.1"),
        ("chttpd", "require_valid_user", "yes"), ("log", "level", "loud"),
        ("chttpd_auth", "same_site", "Lax; Domain=evil.example"), ("couchdb", "default_security", "nobody"),
        ("replicator", "interval", "0"),
    ]

    @Test func outOfRangeValuesAreRefusedAndTheServerRestarts() throws {
        let server = try ServerProcess(arguments: ["--log-level", "warning"])
        for (section, key, value) in Self.outOfRange {
            let answer = try Self.put(server.port, section, key, value)
            #expect(answer.status == 400, "[\(section)] \(key) = \(value): \(answer.json.serializedString())")
            #expect(answer.json["error"] == "bad_request")
            #expect(answer.json["reason"]?.stringValue?.contains(key) == true, "\(answer.json.serializedString())")
        }
        // In range, the same keys are taken.
        for (section, key, value) in [("query_server_config", "os_process_timeout", "4294967295"), ("couchette", "threads", "4"),
                                      ("couchette", "max_connections", "64"), ("couchette", "idle_timeout", "60"),
                                      ("chttpd", "require_valid_user", "False"), ("log", "level", "Warning")] {
            #expect(try Self.put(server.port, section, key, value).status == 200, "[\(section)] \(key) = \(value)")
        }
        let all = try httpRequest(port: server.port, "GET", "/_node/_local/_config")
        #expect(all.status == 200)
        #expect(try JSONValue.parse(all.body)["query_server_config"]?["os_process_timeout"] == "4294967295")
        server.stop(keepData: true)

        let restarted = try ServerProcess(directory: server.directory)
        defer { restarted.stop() }
        let config = try JSONValue.parse(try httpRequest(port: restarted.port, "GET", "/_node/_local/_config").body)
        #expect(config["couchette"]?["threads"] == "4")
        #expect(config["couchette"]?["max_connections"] == "64")
    }

    @Test func aDataDirectoryWithBadSettingsStartsWithTheDefaults() throws {
        let directory = TestServer.makeTemporaryDirectory()
        let secrets = TestServer.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: secrets) }
        try "not for anonymous eyes".write(toFile: secrets + "/secret.txt", atomically: true, encoding: .utf8)
        // As an earlier version's `_config` could leave it, and then some.
        try """
            [query_server_config]
            os_process_timeout = 9223372036854775807
            [httpd]
            port = -1
            [couchette]
            threads = 0
            max_connections = 0
            idle_timeout = -1
            max_header_size = 0
            public_dir = \(secrets)
            [chttpd_auth]
            min_iterations = 10
            max_iterations = 5
            [vendor]
            name = Acme
            this line is not a setting
            [unterminated
            """.write(toFile: directory + "/local.ini", atomically: true, encoding: .utf8)
        let server = try ServerProcess(directory: directory)
        let config = try JSONValue.parse(try httpRequest(port: server.port, "GET", "/_node/_local/_config").body)
        #expect(config["query_server_config"]?["os_process_timeout"] == "5000")
        #expect(config["couchette"]?["threads"] == "16")
        #expect(config["couchette"]?["max_header_size"] == "16384")
        #expect(config["chttpd_auth"]?["min_iterations"] == "10")
        #expect(config["chttpd_auth"]?["max_iterations"] == "1000000000")
        #expect(config["vendor"]?["name"] == "Acme")
        #expect(try httpRequest(port: server.port, "GET", "/_utils/secret.txt").status == 404)
        #expect(try httpRequest(port: server.port, "GET", "/_up").status == 200)
        let log = server.stop()
        for ignored in ["os_process_timeout", "port", "threads", "max_connections", "idle_timeout", "max_header_size",
                        "public_dir", "max_iterations", "line 16", "line 17"] {
            #expect(log.contains(ignored), "the log names \(ignored): \(log)")
        }
    }

    @Test func namesCannotAddLinesToLocalIni() throws {
        let server = try TestServer()
        defer { server.stop() }
        let refused: [(String, String, String, String)] = [
            ("foo%0A%5Badmins%5D", "x", "v", "Invalid configuration section"),
            ("couchdb", "x%0Aadmin", "v", "Invalid configuration key"),
            ("fo%5Bo", "key", "v", "Invalid configuration section"),
            ("foo", "k%5Dey", "v", "Invalid configuration key"),
            ("foo", "k%3Dey", "v", "Invalid configuration key"),
            ("foo", "%3Bcomment", "v", "Invalid configuration key"),
            ("foo", "key", "a\nb", "Invalid configuration value"),
            ("foo", "key", "a\r[admins]", "Invalid configuration value"),
            ("foo", "key", "a\u{1}b", "Invalid configuration value"),
            // Read back as the start of an in-line comment.
            ("foo", "key", "a ;b", "Invalid configuration value"),
            ("foo", "key", ";\u{301}b", "Invalid configuration value"),
            ("foo", "key", "a \t;\u{301}b", "Invalid configuration value"),
            ("foo", "k%09%3By", "v", "Invalid configuration key"),
        ]
        for (section, key, value, reason) in refused {
            let answer = try Self.put(server.port, section, key, value)
            #expect(answer.status == 400, "\(section)/\(key)")
            #expect(answer.json == ["error": "bad_request", "reason": JSONValue(reason)], "\(section)/\(key)")
        }
        // What CouchDB accepts and the file reads back: spaces, tabs, `;` and `#` inside a name.
        #expect(try Self.put(server.port, "foo%20bar", "k%09e%3By%23", "a [b] = c; d").status == 200)
        let text = try String(contentsOfFile: server.directory + "/local.ini", encoding: .utf8)
        let sections = text.split(separator: "\n").filter { $0.hasPrefix("[") }
        #expect(sections == ["[foo bar]"], "\(text)")
        server.stop(keepData: true)
        let restarted = try TestServer(directory: server.directory)
        defer { restarted.stop() }
        #expect(try restarted.json("GET", "/_node/_local/_config/foo%20bar/k%09e%3By%23").json == "a [b] = c; d")
    }

    @Test func pathsAreNotSetOverHTTP() throws {
        let server = try TestServer()
        defer { server.stop() }
        for (section, key) in [("couchette", "public_dir"), ("couchdb", "database_dir"), ("log", "file"), ("ssl", "key_file")] {
            let answer = try Self.put(server.port, section, key, "/etc")
            #expect(answer.status == 403, "\(section)/\(key)")
            #expect(answer.json["error"] == "forbidden")
        }
        #expect(try server.request("GET", "/_utils/shadow").status == 404)
        #expect(!((try? String(contentsOfFile: server.directory + "/local.ini", encoding: .utf8)) ?? "").contains("/etc"))
    }

    @Test func iniTextReadsBackWhatWasWritten() throws {
        let entries = [ConfigurationFile.Entry(section: "a b", key: "k\te;y#", value: "x = [y]; z"),
                       ConfigurationFile.Entry(section: "c", key: "k", value: ""),
                       ConfigurationFile.Entry(section: "a b", key: "other", value: "é")]
        let text = ConfigurationFile(entries: entries).text
        let read = try ConfigurationFile(text: text).entries
        #expect(read.map(\.section) == ["a b", "a b", "c"])
        #expect(Set(read.map { "\($0.section)/\($0.key)=\($0.value)" }) == Set(entries.map { "\($0.section)/\($0.key)=\($0.value)" }))
        // CRLF and CR line ends, as CouchDB reads them.
        let crlf = try ConfigurationFile(text: "[s]\r\na = 1\r\nb = 2\rc = 3\r\n").entries
        #expect(crlf.map(\.key) == ["a", "b", "c"])
        #expect(crlf.map(\.value) == ["1", "2", "3"])
        // In-line comments start at a `;` after a space or tab, as CouchDB reads them.
        let commented = try ConfigurationFile(text: "[s] ; the section\na = 500 ; a comment\nb = x\t;y\nc = a;b\n").entries
        #expect(commented.map { "\($0.section)/\($0.key)=\($0.value)" } == ["s/a=500", "s/b=x", "s/c=a;b"])
        // A CRLF file's admin passwords are hashed in place all the same.
        let directory = TestServer.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/couchdb.ini"
        try "[chttpd]\r\nport = 5984\r\n[admins]\r\nalice = s3cret-Passw0rd\r\n".write(toFile: path, atomically: true, encoding: .utf8)
        #expect(try ConfigurationFile.hashAdminPasswords(in: path, iterations: 10))
        let hashed = try ConfigurationFile(contentsOf: path)
        #expect(hashed.value("alice", in: "admins")?.hasPrefix("-pbkdf2:sha256-") == true)
        #expect(hashed.value("port", in: "chttpd") == "5984")
        #expect(try !String(contentsOfFile: path, encoding: .utf8).contains("s3cret"))
    }
}
