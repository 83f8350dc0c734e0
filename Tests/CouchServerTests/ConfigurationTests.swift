import CouchCore
import CouchServer
import CouchTestSupport
import Foundation
import Testing

/// `/_node/{node}/_config`: reading, changing live, persisting, precedence.
@Suite struct ConfigurationTests {
    @Test func nodeNamesAndReading() throws {
        let server = try TestServer()
        defer { server.stop() }
        #expect(try server.json("GET", "/_node/_local").json == ["name": "couchette@127.0.0.1"])
        let all = try server.json("GET", "/_node/_local/_config")
        #expect(all.status == 200)
        #expect(all.json["couchdb"]?["max_document_size"] == "8000000")
        #expect(all.json["chttpd_auth"]?["iterations"] == "10")
        #expect(try server.json("GET", "/_node/couchette@127.0.0.1/_config/couchdb").json["default_security"] == "admin_only")
        #expect(try server.json("GET", "/_node/_local/_config/log/level").json == "info")
        #expect(try server.json("GET", "/_node/_local/_config/nosection").json == [:])
        let missing = try server.json("GET", "/_node/_local/_config/couchdb/nokey")
        #expect(missing.status == 404)
        #expect(missing.json["reason"] == "unknown_config_value")
        let otherNode = try server.json("GET", "/_node/elsewhere@10.0.0.1/_config")
        #expect(otherNode.status == 404)
        #expect(otherNode.json["reason"] == "no such node: elsewhere@10.0.0.1")
        #expect(try server.json("GET", "/_node").json["reason"] == "Incomplete path to _node request")
        #expect(try server.request("POST", "/_node/_local/_config").header("Allow") == "GET,HEAD")
    }

    @Test func changesTakeEffectLiveAndAnswerTheOldValue() throws {
        let server = try TestServer()
        defer { server.stop() }
        try server.createDatabase("db")
        let put = try server.json("PUT", "/_node/_local/_config/couchdb/max_document_size", body: #""100""#)
        #expect(put.status == 200)
        #expect(put.json == "8000000")
        let big = #"{"text":"\#(String(repeating: "x", count: 200))"}"#
        #expect(try server.request("PUT", "/db/big", body: big).status == 413)
        #expect(try server.json("DELETE", "/_node/_local/_config/couchdb/max_document_size").json == "100")
        #expect(try server.request("PUT", "/db/big", body: big).status == 201)

        let origin = "https://app.example"
        #expect(try server.request("GET", "/", headers: [("Origin", origin)]).header("Access-Control-Allow-Origin") == nil)
        #expect(try server.json("PUT", "/_node/_local/_config/cors/origins", body: "\"\(origin)\"").json == "")
        #expect(try server.request("GET", "/", headers: [("Origin", origin)]).header("Access-Control-Allow-Origin") == origin)

        #expect(try server.json("PUT", "/_node/_local/_config/couchdb/max_document_size", body: #""many""#).status == 400)
        #expect(try server.json("PUT", "/_node/_local/_config/couchdb/max_document_size", body: "12").status == 400)
        let protected = try server.json("PUT", "/_node/_local/_config/query_servers/js", body: #""/bin/sh""#)
        #expect(protected.status == 403)
        #expect(protected.json["reason"] == "Config section blacklisted for modification over HTTP API.")
        #expect(try server.json("DELETE", "/_node/_local/_config/vendor/none").status == 404)
    }

    @Test func aNewAdminIsHashedAndLogsIn() throws {
        let server = try TestServer()
        defer { server.stop() }
        let password = "s3cret-Adm1n"
        #expect(try server.json("PUT", "/_node/_local/_config/admins/boss", body: "\"\(password)\"").json == "")
        let credentials = [basicAuthorization("boss", password)]
        // No longer an admin party: the anonymous client is refused, the new admin is not.
        #expect(try server.json("GET", "/_node/_local/_config").status == 401)
        let session = try server.json("GET", "/_session", headers: credentials).json
        #expect(session["userCtx"]?["name"] == "boss")
        #expect(session["userCtx"]?["roles"]?.arrayValue?.contains("_admin") == true)
        let stored = try #require(try server.json("GET", "/_node/_local/_config/admins/boss", headers: credentials).json.stringValue)
        #expect(stored.hasPrefix("-pbkdf2"))
        #expect(!stored.contains(password))
        let replaced = try server.json("PUT", "/_node/_local/_config/admins/boss", headers: credentials, body: #""other-Passw0rd""#)
        #expect(replaced.json == JSONValue(stored))
        let files = try FileManager.default.contentsOfDirectory(atPath: server.directory)
        for file in files where file.hasSuffix(".ini") {
            let text = try String(contentsOfFile: server.directory + "/" + file, encoding: .utf8)
            #expect(!text.contains(password) && !text.contains("other-Passw0rd"), "\(file)")
        }
        // The old password no longer works; the new one does.
        #expect(try server.json("GET", "/_session", headers: credentials).status == 401)
        #expect(try server.json("GET", "/_session", headers: [basicAuthorization("boss", "other-Passw0rd")]).status == 200)
    }

    @Test func valuesPersistAcrossARestartUnlessAskedNotTo() throws {
        let server = try TestServer()
        #expect(try server.json("PUT", "/_node/_local/_config/vendor/name", body: #""Acme""#).status == 200)
        #expect(try server.json("PUT", "/_node/_local/_config/couchdb/default_security", body: #""everyone""#).status == 200)
        let transient = try server.json("PUT", "/_node/_local/_config/vendor/motto", headers: [("X-Couch-Persist", "false")],
                                        body: #""fleeting""#)
        #expect(transient.status == 200)
        #expect(try server.json("GET", "/_node/_local/_config/vendor").json == ["motto": "fleeting", "name": "Acme"])
        #expect(try server.json("POST", "/_node/_local/_config/_reload").json == ["ok": true])
        #expect(try server.json("GET", "/_node/_local/_config/vendor").json == ["name": "Acme"])
        server.stop(keepData: true)

        let restarted = try TestServer(directory: server.directory)
        defer { restarted.stop() }
        #expect(try restarted.json("GET", "/_node/_local/_config/vendor/name").json == "Acme")
        #expect(try restarted.json("GET", "/_node/_local/_config/couchdb/default_security").json == "everyone")
    }

    @Test func commandLineAndEnvironmentWinOverTheDataDirectoryAtStart() throws {
        let directory = TestServer.makeTemporaryDirectory()
        try "[couchdb]\nmax_document_size = 100\n[log]\nlevel = debug\n"
            .write(toFile: directory + "/local.ini", atomically: true, encoding: .utf8)
        var configuration = ServerConfiguration.testing()
        configuration.maximumDocumentSize = 5000
        configuration.pinnedKeys = ["couchdb/max_document_size"]
        let server = try TestServer(directory: directory, configuration: configuration)
        defer { server.stop() }
        #expect(try server.json("GET", "/_node/_local/_config/couchdb/max_document_size").json == "5000")
        #expect(try server.json("GET", "/_node/_local/_config/log/level").json == "debug")
        // Set while running, a pinned key changes all the same.
        #expect(try server.json("PUT", "/_node/_local/_config/couchdb/max_document_size", body: #""300""#).json == "5000")
        #expect(try server.json("GET", "/_node/_local/_config/couchdb/max_document_size").json == "300")

        let environment = ServerConfiguration.environmentEntries([
            "COUCHETTE_COUCHDB__MAX_DOCUMENT_SIZE": "42", "COUCHETTE_ADMINS__Alice": "pw", "COUCHETTE_PORT": "1", "PATH": "/bin",
        ])
        #expect(environment.map { "\($0.section)/\($0.key)=\($0.value)" } == ["admins/Alice=pw", "couchdb/max_document_size=42"])
    }
}

@Suite struct MaintenanceModeTests {
    @Test func upFollowsMaintenanceModeAndStorage() throws {
        let server = try TestServer()
        defer {
            chmod(server.directory, 0o700)
            server.stop()
        }
        #expect(try server.json("GET", "/_up").json["status"] == "ok")
        #expect(try server.json("PUT", "/_node/_local/_config/couchdb/maintenance_mode", body: #""true""#).status == 200)
        let maintenance = try server.json("GET", "/_up")
        #expect(maintenance.status == 404)
        #expect(maintenance.json == ["status": "maintenance_mode"])
        #expect(try server.json("PUT", "/_node/_local/_config/couchdb/maintenance_mode", body: #""nolb""#).status == 200)
        #expect(try server.json("GET", "/_up").json == ["status": "nolb"])
        #expect(try server.json("PUT", "/_node/_local/_config/couchdb/maintenance_mode", body: #""false""#).status == 200)
        #expect(try server.json("GET", "/_up").status == 200)
        // A data directory that cannot be written is reported (root ignores permissions).
        if getuid() != 0 {
            chmod(server.directory, 0o500)
            #expect(try server.json("GET", "/_up").status == 404)
        }
    }
}
