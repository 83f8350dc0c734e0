import CouchCore
import CouchServer
import CouchStore
import CouchTestSupport
import Foundation
import Testing

@Suite struct CORSTests {
    static let app = "http://app.example:8080"
    static let evil = "http://evil.example"

    static func preflight(_ origin: String, method: String = "PUT", headers: String = "content-type, authorization") -> [(String, String)] {
        [("Origin", origin), ("Access-Control-Request-Method", method), ("Access-Control-Request-Headers", headers)]
    }

    @Test func offByDefault() throws {
        let server = try TestServer()
        defer { server.stop() }
        let preflight = try server.request("OPTIONS", "/db/doc", headers: Self.preflight(Self.app))
        #expect(preflight.status == 405)
        #expect(preflight.header("Access-Control-Allow-Origin") == nil)
        #expect(try server.request("GET", "/", headers: [("Origin", Self.app)]).header("Access-Control-Allow-Origin") == nil)
    }

    @Test func preflightFromAnAllowedOriginNeedsNoCredentials() throws {
        let fixture = try SecuredServer {
            $0.cors.origins = [Self.app]
            $0.cors.credentials = true
        }
        let response = try fixture.server.request("OPTIONS", "/secured/doc", headers: Self.preflight(Self.app))
        #expect(response.status == 204)
        #expect(response.header("Access-Control-Allow-Origin") == Self.app)
        #expect(response.header("Access-Control-Allow-Credentials") == "true")
        #expect(response.header("Access-Control-Allow-Methods")?.contains("PUT") == true)
        #expect(response.header("Access-Control-Allow-Headers") == "content-type, authorization")
        #expect(response.header("Access-Control-Max-Age") == "600")

        // The request itself, with cookies: CORS headers on success and on refusal alike.
        let cookie = try fixture.login("member")
        let put = try fixture.server.request("PUT", "/secured/doc", headers: [("Origin", Self.app), cookieHeader(cookie)], body: "{}")
        #expect(put.status == 201)
        #expect(put.header("Access-Control-Allow-Origin") == Self.app)
        #expect(put.header("Access-Control-Allow-Credentials") == "true")
        #expect(put.header("Access-Control-Expose-Headers")?.contains("etag") == true)
        let refused = try fixture.server.request("GET", "/secured", headers: [("Origin", Self.app)])
        #expect(refused.status == 401)
        #expect(refused.header("Access-Control-Allow-Origin") == Self.app)
    }

    @Test func aRefusedOriginGetsNoCORSHeaders() throws {
        let fixture = try SecuredServer { $0.cors.origins = [Self.app] }
        let preflight = try fixture.server.request("OPTIONS", "/secured/doc", headers: Self.preflight(Self.evil))
        #expect(preflight.status != 204)
        #expect(!preflight.headers.contains { $0.name.lowercased().hasPrefix("access-control-") })
        let get = try fixture.server.request("GET", "/", headers: [("Origin", Self.evil)])
        #expect(get.status == 200)
        #expect(!get.headers.contains { $0.name.lowercased().hasPrefix("access-control-") })
        // An allowed origin asking for a method or header not allowed gets no preflight either.
        for headers in [Self.preflight(Self.app, method: "PATCH"), Self.preflight(Self.app, headers: "x-secret")] {
            let response = try fixture.server.request("OPTIONS", "/secured/doc", headers: headers)
            #expect(response.status != 204)
            #expect(response.header("Access-Control-Allow-Methods") == nil)
        }
    }

    @Test func anyOriginIsEchoedWithoutCredentials() throws {
        var configuration = ServerConfiguration.testing()
        configuration.cors.origins = ["*"]
        let server = try TestServer(configuration: configuration)
        defer { server.stop() }
        let response = try server.request("GET", "/", headers: [("Origin", Self.evil)])
        #expect(response.header("Access-Control-Allow-Origin") == Self.evil)
        #expect(response.header("Access-Control-Allow-Credentials") == nil)

    }

    /// `origins = *` with `credentials = true`, as CouchDB's `chttpd_cors` accepts it (the usual
    /// PouchDB-in-a-browser set-up): each page's own origin is echoed with credentials, never `*`.
    @Test func anyOriginWithCredentialsEchoesTheOrigin() throws {
        var configuration = ServerConfiguration.testing()
        configuration.cors.origins = ["*"]
        configuration.cors.credentials = true
        let server = try TestServer(configuration: configuration)
        defer { server.stop() }
        let page = "http://localhost:8000"
        let response = try server.request("GET", "/", headers: [("Origin", page)])
        #expect(response.header("Access-Control-Allow-Origin") == page)
        #expect(response.header("Access-Control-Allow-Credentials") == "true")
        let preflight = try server.request("OPTIONS", "/db/doc", headers: [
            ("Origin", page), ("Access-Control-Request-Method", "PUT"), ("Access-Control-Request-Headers", "content-type"),
        ])
        #expect(preflight.status == 204)
        #expect(preflight.header("Access-Control-Allow-Origin") == page)
        #expect(preflight.header("Access-Control-Allow-Credentials") == "true")
        // The literal origin "*" never gets credentials.
        let literal = try server.request("GET", "/", headers: [("Origin", "*")])
        #expect(literal.header("Access-Control-Allow-Origin") != "*" || literal.header("Access-Control-Allow-Credentials") == nil)
    }

    @Test func originPatternsMatchPortsAndLabelsOnly() throws {
        var configuration = ServerConfiguration.testing()
        configuration.cors.origins = ["http://localhost:*", "https://*.example.com"]
        let server = try TestServer(configuration: configuration)
        defer { server.stop() }
        for origin in ["http://localhost:5173", "http://localhost:8080", "https://app.example.com"] {
            #expect(try server.request("GET", "/", headers: [("Origin", origin)]).header("Access-Control-Allow-Origin") == origin)
        }
        for origin in ["http://localhost", "http://localhost:80.evil.example", "https://localhost:5173",
                       "https://a.b.example.com", "https://example.com", "http://evil.example"] {
            #expect(try server.request("GET", "/", headers: [("Origin", origin)]).header("Access-Control-Allow-Origin") == nil,
                    "\(origin)")
        }
    }

    @Test func corsSectionOfAConfigurationFile() throws {
        var configuration = ServerConfiguration()
        try configuration.apply(ConfigurationFile(text: """
            [chttpd]
            enable_cors = true
            [cors]
            origins = http://a.example, http://b.example
            credentials = true
            methods = GET, PUT
            headers = accept, content-type
            max_age = 60
            """))
        #expect(configuration.cors.origins == ["http://a.example", "http://b.example"])
        #expect(configuration.cors.credentials)
        #expect(configuration.cors.methods == ["GET", "PUT"])
        #expect(configuration.cors.headers == ["accept", "content-type"])
        #expect(configuration.cors.maxAge == 60)
        var disabled = ServerConfiguration()
        try disabled.apply(ConfigurationFile(text: "[chttpd]\nenable_cors = false\n[cors]\norigins = *\n"))
        #expect(!disabled.cors.isEnabled)
    }
}
