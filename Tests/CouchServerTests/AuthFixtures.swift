import CouchCore
import CouchServer
import CouchTestSupport
import Foundation
import Testing

/// A server with a server admin and users, and a database `secured` whose `_security`
/// names a database admin (`dbadmin`), a member by name (`member`) and by role
/// (`teammate`, role `team`); `outsider` is a valid user who is none of these.
final class SecuredServer: @unchecked Sendable {
    static let adminName = "admin"
    static let adminPassword = "admin-pass-4Tq"
    let server: TestServer

    static let securityObject = #"{"admins":{"names":["dbadmin"],"roles":[]},"members":{"names":["member"],"roles":["team"]}}"#

    init(configuration: ServerConfiguration = .testing(admins: [adminName: adminPassword]),
         configure: (inout ServerConfiguration) -> Void = { _ in }) throws {
        var configuration = configuration
        configure(&configuration)
        server = try TestServer(configuration: configuration)
        for (name, roles) in [("member", [String]()), ("dbadmin", []), ("outsider", []), ("teammate", ["team"])] {
            try createUser(name, password: Self.password(of: name), roles: roles)
        }
        #expect(try server.request("PUT", "/secured", headers: [admin]).status == 201)
        try setSecurity("secured", Self.securityObject)
    }

    deinit { server.stop() }

    static func password(of name: String) -> String { name == adminName ? adminPassword : "\(name)-pass-9Zw" }

    var admin: (String, String) { basicAuthorization(Self.adminName, Self.adminPassword) }

    func credentials(_ name: String) -> [(String, String)] {
        name == "anonymous" ? [] : [basicAuthorization(name, Self.password(of: name))]
    }

    func createUser(_ name: String, password: String, roles: [String] = []) throws {
        let rolesJSON = JSONValue.array(roles.map { JSONValue($0) }).serializedString()
        let body = #"{"name":"\#(name)","password":"\#(password)","roles":\#(rolesJSON),"type":"user"}"#
        let response = try server.request("PUT", "/_users/org.couchdb.user:\(name)", headers: [admin], body: body)
        guard response.status == 201 else { throw TestServerError.unexpected("create user \(name): \(response.status) \(response.text)") }
    }

    func setSecurity(_ database: String, _ json: String) throws {
        let response = try server.request("PUT", "/\(database)/_security", headers: [admin], body: json)
        guard response.status == 200 else { throw TestServerError.unexpected("_security: \(response.status) \(response.text)") }
    }

    /// A request as `who` ("anonymous", "admin" or a user name); returns status and error name.
    func attempt(_ who: String, _ method: String, _ path: String, body: String? = nil,
                 headers: [(String, String)] = []) throws -> (status: Int, error: String?) {
        let response = try server.request(method, path, headers: credentials(who) + headers, body: body)
        let error = (try? JSONValue.parse(response.body))?["error"]?.stringValue
        return (response.status, error)
    }

    /// Logs in through `POST /_session`; returns the `AuthSession` cookie value.
    func login(_ name: String, password: String? = nil) throws -> String {
        let body = #"{"name":"\#(name)","password":"\#(password ?? Self.password(of: name))"}"#
        let response = try server.request("POST", "/_session", body: body)
        guard response.status == 200, let cookie = sessionCookie(in: response) else {
            throw TestServerError.unexpected("login \(name): \(response.status) \(response.text)")
        }
        return cookie
    }
}

/// The `AuthSession` value a response sets, if any.
func sessionCookie(in response: HTTPTestResponse) -> String? {
    guard let header = response.header("Set-Cookie"), header.hasPrefix("AuthSession=") else { return nil }
    return String(header.dropFirst("AuthSession=".count).prefix { $0 != ";" })
}

func cookieHeader(_ value: String) -> (String, String) { ("Cookie", "AuthSession=\(value)") }

/// Every file under `directory`, read as bytes.
func allFileBytes(under directory: String) -> [(path: String, bytes: [UInt8])] {
    guard let enumerator = FileManager.default.enumerator(atPath: directory) else { return [] }
    var files: [(String, [UInt8])] = []
    for case let relative as String in enumerator {
        let path = directory + "/" + relative
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), !isDirectory.boolValue,
              let data = FileManager.default.contents(atPath: path) else { continue }
        files.append((path, Array(data)))
    }
    return files
}

func contains(_ haystack: [UInt8], _ needle: String) -> Bool {
    Data(haystack).range(of: Data(needle.utf8)) != nil
}
