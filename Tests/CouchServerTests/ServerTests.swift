import CouchCore
import CouchTestSupport
import Testing

@Suite struct ServerTests {
    @Test func welcomeNamesCouchDBAndAStableUUID() throws {
        let server = try TestServer()
        let (status, welcome) = try server.json("GET", "/")
        #expect(status == 200)
        #expect(welcome["couchdb"]?.stringValue == "Welcome")
        #expect(welcome["version"]?.stringValue?.hasPrefix("3.") == true)
        #expect(welcome["vendor"]?["name"]?.stringValue == "Couchette")
        let uuid = try #require(welcome["uuid"]?.stringValue)
        #expect(uuid.count == 32)
        server.stop(keepData: true)

        let restarted = try TestServer(directory: server.directory)
        defer { restarted.stop() }
        #expect(try restarted.json("GET", "/").json["uuid"]?.stringValue == uuid)
    }

    @Test func allDatabasesHonoursRangeAndPaging() throws {
        let server = try TestServer()
        defer { server.stop() }
        for name in ["delta", "alpha", "charlie", "bravo", "a/b"] { try server.createDatabase(name.replacingOccurrences(of: "/", with: "%2F")) }
        #expect(try server.json("GET", "/_all_dbs").json == ["_replicator", "a/b", "alpha", "bravo", "charlie", "delta"])
        #expect(try server.json("GET", "/_all_dbs?descending=true&limit=2").json == ["delta", "charlie"])
        #expect(try server.json("GET", "/_all_dbs?startkey=%22b%22&endkey=%22c%22").json == ["bravo"])
        #expect(try server.json("GET", "/_all_dbs?skip=2&limit=2").json == ["alpha", "bravo"])
    }

    @Test func uuidsAreUniqueAndBounded() throws {
        let server = try TestServer()
        defer { server.stop() }
        let uuids = try #require(try server.json("GET", "/_uuids?count=50").json["uuids"]?.arrayValue)
        #expect(Set(uuids.compactMap(\.stringValue)).count == 50)
        #expect(try server.json("GET", "/_uuids?count=1001").status == 400)
        #expect(try server.json("GET", "/_up").json["status"]?.stringValue == "ok")
    }

    @Test func unknownMethodsAnswer405WithAllow() throws {
        let server = try TestServer()
        defer { server.stop() }
        let response = try server.request("DELETE", "/_all_dbs")
        #expect(response.status == 405)
        #expect(response.header("Allow") == "GET,HEAD")
        let error = try JSONValue.parse(response.body)
        #expect(error["error"]?.stringValue == "method_not_allowed")
    }

    @Test func responsesAreJSONWithCouchDBHeaders() throws {
        let server = try TestServer()
        defer { server.stop() }
        let response = try server.request("GET", "/")
        #expect(response.header("Content-Type") == "application/json")
        #expect(response.header("Cache-Control") == "must-revalidate")
        #expect(response.header("Server")?.contains("CouchDB/3") == true)
    }
}

@Suite struct HeaderOrderTests {
    /// python-couchdb reads a login's cookie from the first header of the answer, where
    /// CouchDB puts it; `Date` and the server's own headers come after.
    @Test func loginCookieIsTheFirstHeader() throws {
        let server = try TestServer()
        defer { server.stop() }
        let user = #"{"name":"foo","password":"secret","roles":[],"type":"user"}"#
        #expect(try server.request("PUT", "/_users/org.couchdb.user:foo", body: user).status == 201)
        let login = try server.request("POST", "/_session", body: #"{"name":"foo","password":"secret"}"#)
        #expect(login.status == 200)
        #expect(login.headers.first?.name == "Set-Cookie")
        #expect(login.header("Date")?.hasSuffix(" GMT") == true)
    }
}
