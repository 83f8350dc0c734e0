import CouchCore
import CouchTestSupport
import Foundation
import Testing

/// Requests the server used to accept or answer unlike CouchDB, sent to the real binary.
@Suite struct HostileAnswersTests {
    typealias Target = HostileRequestTests.Target
    static let admin = basicAuthorization("admin", "secret")

    @Test func ambiguousBodyFramingIsRefused() throws {
        let server = try Target()
        #expect(try server.request("PUT", "/db").status == 201)
        let heads = [
            "PUT /db/a HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\nContent-Length: 20\r\n\r\n{}",
            "PUT /db/b HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
        ]
        for head in heads {
            let connection = try HTTPTestConnection(port: server.process.port, timeout: 5)
            let answer = try connection.sendRaw(Array(head.utf8))
            connection.close()
            #expect(answer.status == 400)
            #expect(try JSONValue.parse(answer.body)["error"] == "bad_request")
            server.expectUp()
        }
        #expect(try server.json("GET", "/db").json["doc_count"] == 0)
        // The same length twice is no ambiguity.
        let twice = try HTTPTestConnection(port: server.process.port, timeout: 5)
        defer { twice.close() }
        let same = try twice.sendRaw(Array(
            "PUT /db/c HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\n{}".utf8))
        #expect(same.status == 201)
    }

    @Test func usersDatabaseTellsStrangersNothing() throws {
        let server = try Target(arguments: ["--admin", "admin:secret"])
        #expect(try server.request("PUT", "/_users/org.couchdb.user:bob", body: #"{"name":"bob","type":"user","roles":[],"password":"pw"}"#).status == 201)
        let diff = try server.json("POST", "/_users/_revs_diff", body: #"{"org.couchdb.user:bob":["9-x"],"org.couchdb.user:nobody":["9-x"]}"#)
        #expect(diff.status == 401)
        #expect(diff.json["error"] == "unauthorized")
        #expect(try server.json("POST", "/_users/_missing_revs", body: #"{"org.couchdb.user:bob":["9-x"]}"#).status == 401)
        let info = try server.json("GET", "/_users")
        #expect(info.status == 401)
        #expect(info.json["doc_count"] == nil)
        // Bob himself learns no more; an admin does.
        let asBob = try server.json("GET", "/_users", headers: [basicAuthorization("bob", "pw")])
        #expect(asBob.status == 401 && asBob.json["doc_count"] == nil)
        // Bob and `_design/_auth`.
        #expect(try server.json("GET", "/_users", headers: [Self.admin]).json["doc_count"] == 2)
        #expect(try server.json("POST", "/_users/_revs_diff", headers: [Self.admin], body: #"{"org.couchdb.user:bob":["9-x"]}"#).status == 200)
        // Logins: an unknown user and a wrong password get the same answer.
        let unknown = try server.json("POST", "/_session", body: #"{"name":"nobody","password":"x"}"#)
        let wrong = try server.json("POST", "/_session", body: #"{"name":"bob","password":"x"}"#)
        #expect(unknown.status == 401 && wrong.status == 401)
        #expect(unknown.json == wrong.json)
        server.expectUp()
    }

    @Test func replicateAnswersLikeCouchDB() throws {
        let server = try Target()
        let missing = try server.json("POST", "/_replicate", body: #"{"source":"nope","target":"other","create_target":true}"#)
        #expect(missing.status == 404)
        #expect(missing.json["error"] == "db_not_found")
        let cancel = try server.json("POST", "/_replicate", body: #"{"replication_id":"0123abcd","cancel":true}"#)
        #expect(cancel.status == 404)
        #expect(cancel.json == ["error": "not_found", "reason": "missing"])
        server.expectUp()
    }

    @Test func attachmentsThatCouldNotBeServedAreRefused() throws {
        let server = try Target()
        #expect(try server.request("PUT", "/db").status == 201)
        // "encoding": "gzip" with data that is not gzip.
        let plain = Data("not gzip at all".utf8).base64EncodedString()
        let fake = try server.json("PUT", "/db/fake", body: #"{"_attachments":{"a.txt":{"content_type":"text/plain","encoding":"gzip","data":"\#(plain)"}}}"#)
        #expect(fake.status == 400)
        #expect(fake.json["error"] == "bad_request")
        let bulk = try server.json("POST", "/db/_bulk_docs", body: #"{"docs":[{"_id":"fake2","_attachments":{"a.txt":{"content_type":"text/plain","encoding":"gzip","data":"\#(plain)"}}}]}"#)
        #expect(bulk.status == 400 || bulk.json.arrayValue?.first?["error"] == "bad_request", "\(bulk.json)")
        #expect(try server.request("GET", "/db/fake").status == 404)
        #expect(try server.request("GET", "/db/fake2").status == 404)
        // Real gzip is kept and served.
        let gzipped = Data(Gzip.compress(Array("hello".utf8))).base64EncodedString()
        #expect(try server.request("PUT", "/db/real", body: #"{"_attachments":{"a.txt":{"content_type":"text/plain","encoding":"gzip","data":"\#(gzipped)"}}}"#).status == 201)
        #expect(try server.request("GET", "/db/real/a.txt").text == "hello")
        // A content type that would break the response head.
        let hello = Data("hello".utf8).base64EncodedString()
        let header = try server.json("PUT", "/db/crlf", body: #"{"_attachments":{"a.txt":{"content_type":"text/plain\r\nSet-Cookie: x=y","data":"\#(hello)"}}}"#)
        #expect(header.status == 400)
        #expect(try server.request("GET", "/db/crlf").status == 404)
        server.expectUp()
    }

    @Test func copyDestinationIsParsedAsCouchDBParsesIt() throws {
        let server = try Target()
        #expect(try server.request("PUT", "/db").status == 201)
        #expect(try server.request("PUT", "/db/source", body: #"{"n":1}"#).status == 201)
        let emptyID = try server.json("COPY", "/db/source", headers: [("Destination", "?rev=1-x")])
        #expect(emptyID.status == 400)
        #expect(try server.request("GET", "/db/rev=1-x").status == 404)
        #expect(try server.json("COPY", "/db/source", headers: [("Destination", "http://elsewhere/db/x")]).status == 400)
        let target = try server.json("PUT", "/db/target", body: "{}")
        let rev = try #require(target.json["rev"]?.stringValue)
        let copied = try server.json("COPY", "/db/source", headers: [("Destination", "target?rev=\(rev)")])
        #expect(copied.status == 201)
        #expect(copied.json["rev"]?.stringValue?.hasPrefix("2-") == true)
        #expect(try server.json("GET", "/db/target").json["n"] == 1)
        server.expectUp()
    }

    @Test func dataDirectoryIsPrivateAndAdminsNeedNoCommandLine() throws {
        let directory = TestServer.makeTemporaryDirectory() + "/data"
        let adminFile = TestServer.makeTemporaryDirectory() + "/admins"
        try "# admins\nfiled:file-pw\n".write(toFile: adminFile, atomically: true, encoding: .utf8)
        let server = try Target(arguments: ["--admin-file", adminFile], directory: directory,
                                environment: ["COUCHETTE_ADMIN": "admin:secret"])
        #expect(try server.request("PUT", "/db", headers: [Self.admin]).status == 201)
        #expect(try server.request("PUT", "/db/doc", headers: [Self.admin],
                                   body: #"{"_attachments":{"a.txt":{"content_type":"text/plain","data":"aGVsbG8="}}}"#).status == 201)
        #expect(try server.request("GET", "/_all_dbs", headers: [basicAuthorization("filed", "file-pw")]).status == 200)
        #expect(try server.request("GET", "/_all_dbs").status == 401)
        // Nothing under the data directory is readable by others.
        let commandLine = try String(contentsOfFile: "/proc/\(server.process.process.processIdentifier)/cmdline", encoding: .utf8)
        #expect(!commandLine.contains("secret") && !commandLine.contains("file-pw"))
        func mode(_ path: String) throws -> Int {
            (try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? NSNumber)?.intValue ?? -1
        }
        #expect(try mode(directory) == 0o700)
        let enumerator = try #require(FileManager.default.enumerator(atPath: directory))
        var files = 0
        for case let relative as String in enumerator {
            let path = directory + "/" + relative
            var isDirectory: ObjCBool = false
            _ = FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory)
            #expect(try mode(path) & 0o077 == 0, "\(relative) is readable by others")
            if !isDirectory.boolValue { files += 1 }
        }
        #expect(files >= 4)
        server.expectUp()
    }
}
