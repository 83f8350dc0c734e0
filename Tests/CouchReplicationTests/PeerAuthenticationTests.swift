import CouchCore
@testable import CouchReplication
import CouchTestSupport
import CurlClient
import Foundation
import Testing

/// How the replicator authenticates to remote peers: against a Couchette that requires
/// it, and against small recording servers that check each method's headers.
@Suite(.serialized) struct PeerAuthenticationTests {
    @Test func replicatesWithACouchetteThatRequiresAuthentication() async throws {
        let a = try TestServer()
        let b = try TestServer(configuration: .testing(admins: ["admin": "p@ss:word"]))
        defer { a.stop(); b.stop() }
        let admin = basicAuthorization("admin", "p@ss:word")
        try await a.call("PUT", "/source")
        try await a.fill("source", count: 20)
        for name in ["url", "basic", "header", "pull"] {
            #expect(try await b.call("PUT", "/\(name)", headers: [admin]).status == 201)
        }
        let plain = "http://127.0.0.1:\(b.port)/"
        let withPassword = "http://admin:p%40ss%3Aword@127.0.0.1:\(b.port)/"
        let targets: [(String, JSONValue)] = [
            ("url", JSONValue(withPassword + "url")),
            ("basic", ["url": JSONValue(plain + "basic"), "auth": ["basic": ["username": "admin", "password": "p@ss:word"]]]),
            ("header", ["url": JSONValue(plain + "header"), "headers": ["Authorization": JSONValue(admin.1)]]),
        ]
        for (name, target) in targets {
            let (status, result) = try await a.replicate(["source": "source", "target": target])
            #expect(status == 200)
            #expect(result["ok"] == true, "\(name): \(result.serializedString())")
            #expect(try await b.call("GET", "/\(name)", headers: [admin]).json["doc_count"] == 20)
        }
        // Pulling from it too.
        let pulled = try await a.replicate(["source": JSONValue(withPassword + "url"), "target": "pulled", "create_target": true]).json
        #expect(pulled["ok"] == true, "\(pulled.serializedString())")
        #expect(try await a.documentCount("pulled") == 20)
        // Without credentials: a clear failure.
        let (refusedStatus, refused) = try await a.replicate(["source": "source", "target": JSONValue(plain + "pull")])
        #expect(refusedStatus == 401)
        #expect(refused["error"] == "unauthorized")
        #expect(refused["reason"] == JSONValue("unauthorized to access or create database \(plain)pull/"))
        // With a wrong password: a clear failure that does not repeat the password.
        let (wrongStatus, wrong) = try await a.replicate(["source": "source", "target": JSONValue("http://admin:WRONG@127.0.0.1:\(b.port)/pull")])
        #expect(wrongStatus == 401)
        #expect(wrong["error"] == "unauthorized")
        #expect(!wrong.serializedString().contains("WRONG"))
        #expect(wrong.serializedString().contains("admin:*****@"))
    }

    /// A peer with CouchDB's cookie sessions: `POST /_session` (form), then `AuthSession`.
    final class SessionPeer: @unchecked Sendable {
        let lock = NSLock()
        var generation = 0
        var valid: String?
        var maxAge = 600
        var server: LoopbackHTTPServer!

        init() throws {
            server = try LoopbackHTTPServer { [unowned self] request in self.answer(request) }
        }

        /// Logins answered 503 before one succeeds.
        var failingLogins = 0

        func invalidate() { lock.withLock { valid = nil } }

        func answer(_ request: LoopbackHTTPServer.Request) -> LoopbackHTTPServer.Action {
            lock.lock()
            defer { lock.unlock() }
            if request.path == "/_session" {
                if failingLogins > 0 {
                    failingLogins -= 1
                    return .respond(.json(503, ["error": "service_unavailable", "reason": "try again"]))
                }
                guard request.method == "POST", request.header("content-type") == "application/x-www-form-urlencoded",
                      String(decoding: request.body, as: UTF8.self) == "name=u&password=p%40ss" else {
                    return .respond(.json(401, ["error": "unauthorized", "reason": "Name or password is incorrect."]))
                }
                generation += 1
                let token = "tok\(generation)"
                valid = token
                return .respond(.json(200, ["ok": true, "name": "u"],
                                      headers: [("Set-Cookie", "AuthSession=\(token); Version=1; Path=/; Max-Age=\(maxAge); HttpOnly")]))
            }
            guard let valid, request.header("cookie") == "AuthSession=\(valid)" else {
                return .respond(.json(401, ["error": "unauthorized", "reason": "You are not authorized."]))
            }
            return .respond(.json(200, ["db_name": "db", "update_seq": 0, "instance_start_time": "0"]))
        }
    }

    func endpoint(_ url: String, _ json: JSONObject = [:]) throws -> RemoteEndpoint {
        var object = json
        object["url"] = JSONValue(url)
        guard case .remote(let peer) = try ReplicationPeer(json: .object(object), role: "source") else {
            throw ReplicationError.badRequest("not remote")
        }
        return RemoteEndpoint(peer: peer, client: HTTPClient(), retries: 0)
    }

    @Test func cookieSessionsAreOpenedSharedAndRenewed() async throws {
        let peer = try SessionPeer()
        defer { peer.server.stop() }
        let endpoint = try endpoint("http://u:p%40ss@127.0.0.1:\(peer.server.port)/db")
        endpoint.authenticator.minimumRefreshInterval = 0
        // Concurrent first requests share one login.
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<5 { group.addTask { _ = try await endpoint.info() } }
            try await group.waitForAll()
        }
        var logins = peer.server.requests.filter { $0.path == "/_session" }
        #expect(logins.count == 1)
        #expect(peer.server.requests.filter { $0.path != "/_session" }.allSatisfy { $0.header("cookie") == "AuthSession=tok1" })
        #expect(peer.server.requests.allSatisfy { $0.header("authorization") == nil }, "no password on the wire after login")
        // A refused cookie is renewed and the request retried.
        peer.invalidate()
        _ = try await endpoint.info()
        logins = peer.server.requests.filter { $0.path == "/_session" }
        #expect(logins.count == 2)
        #expect(peer.server.requests.last?.header("cookie") == "AuthSession=tok2")
        // A cookie is renewed before 90 % of its Max-Age has passed.
        peer.lock.withLock { peer.maxAge = 1 }
        peer.invalidate()
        _ = try await endpoint.info()
        try await Task.sleep(nanoseconds: 1_000_000_000)
        _ = try await endpoint.info()
        #expect(peer.server.requests.filter { $0.path == "/_session" }.count == 4)
        #expect(peer.server.requests.last?.header("cookie") == "AuthSession=tok4")
    }

    @Test func aLoginThatFailsOnceIsRetried() async throws {
        let peer = try SessionPeer()
        defer { peer.server.stop() }
        peer.lock.withLock { peer.failingLogins = 2 }
        let url = "http://u:p%40ss@127.0.0.1:\(peer.server.port)/db"
        guard case .remote(let remote) = try ReplicationPeer(json: ["url": JSONValue(url)], role: "source") else { return }
        let endpoint = RemoteEndpoint(peer: remote, client: HTTPClient(), retries: 3)
        #expect(try await endpoint.info().updateSequence == SourceSequence(0))
        #expect(peer.server.requests.filter { $0.path == "/_session" }.count == 3)
        // With no retries left, the failure is reported, not swallowed.
        peer.lock.withLock { peer.failingLogins = 5 }
        peer.invalidate()
        let impatient = RemoteEndpoint(peer: remote, client: HTTPClient(), retries: 1)
        await #expect(throws: ReplicationError.self) { _ = try await impatient.info() }
    }

    @Test func aPeerWithoutSessionsGetsBasicAuthentication() async throws {
        let server = try LoopbackHTTPServer { request in
            if request.path == "/_session" { return .respond(.json(404, ["error": "not_found"])) }
            guard request.header("authorization") == "Basic " + Base64.encode(Array("u:p@ss".utf8)) else {
                return .respond(.json(401, ["error": "unauthorized"]))
            }
            return .respond(.json(200, ["update_seq": 3, "instance_start_time": "0"]))
        }
        defer { server.stop() }
        let endpoint = try endpoint("http://u:p%40ss@127.0.0.1:\(server.port)/db")
        #expect(try await endpoint.info().updateSequence == SourceSequence(3))
        _ = try await endpoint.info()
        #expect(server.requests.filter { $0.path == "/_session" }.count == 1, "asked once")
    }

    @Test func aSessionEndpointThatDemandsBasicCredentialsGetsThem() async throws {
        let expected = "Basic " + Base64.encode(Array("u:p@ss".utf8))
        let server = try LoopbackHTTPServer { request in
            if request.path == "/_session" {
                guard request.header("authorization") == expected else {
                    return .respond(.json(401, ["error": "unauthorized"], headers: [("WWW-Authenticate", "Basic realm=\"server\"")]))
                }
                return .respond(.json(200, ["ok": true], headers: [("Set-Cookie", "AuthSession=xyz; Path=/")]))
            }
            guard request.header("cookie") == "AuthSession=xyz" else { return .respond(.json(401, ["error": "unauthorized"])) }
            return .respond(.json(200, ["update_seq": 1, "instance_start_time": "0"]))
        }
        defer { server.stop() }
        let endpoint = try endpoint("http://u:p%40ss@127.0.0.1:\(server.port)/db")
        _ = try await endpoint.info()
        #expect(server.requests.filter { $0.path == "/_session" }.count == 2)
    }

    @Test func oauthSignsEveryRequestVerifiablyAndCustomHeadersGoAlong() async throws {
        let credentials = OAuthCredentials(consumerKey: "ck", consumerSecret: "cs", token: "tk", tokenSecret: "ts")
        let server = try LoopbackHTTPServer { request in
            // Verify as a server would: rebuild the base string from the request and the header's parameters.
            guard let header = request.header("authorization"), header.hasPrefix("OAuth "), request.header("x-tenant") == "blue" else {
                return .respond(.json(401, ["error": "unauthorized"]))
            }
            var parameters: [(String, String)] = []
            var signature = ""
            for field in header.dropFirst(6).components(separatedBy: ", ") {
                let parts = field.split(separator: "=", maxSplits: 1)
                let name = String(parts[0])
                let value = PercentDecoding.decodeLeniently(parts[1].dropFirst().dropLast())
                if name == "oauth_signature" { signature = value } else { parameters.append((name, value)) }
            }
            let url = "http://" + (request.header("host") ?? "") + request.target
            let base = OAuthSigner.signatureBaseString(method: request.method, url: url,
                                                       parameters: parameters + OAuthSigner.queryParameters(of: url))
            guard signature == OAuthSigner.hmacSHA1Signature(base, consumerSecret: "cs", tokenSecret: "ts"),
                  parameters.contains(where: { $0 == ("oauth_token", "tk") }) else {
                return .respond(.json(401, ["error": "unauthorized", "reason": "bad signature"]))
            }
            if request.path == "/db/_changes" {
                return .respond(.json(200, ["results": [], "last_seq": 0]))
            }
            return .respond(.json(200, ["update_seq": 0, "instance_start_time": "0"]))
        }
        defer { server.stop() }
        let endpoint = try endpoint("http://127.0.0.1:\(server.port)/db", [
            "auth": ["oauth": ["consumer_key": "ck", "consumer_secret": "cs", "token": "tk", "token_secret": "ts"]],
            "headers": ["X-Tenant": "blue"],
        ])
        #expect(endpoint.peer.oauth == credentials)
        _ = try await endpoint.info()
        let stream = try await endpoint.changes(ChangesRequest(since: SourceSequence("1-abc def"), continuous: false))
        while try await stream.next() != nil {}
        #expect(server.requests.count == 2)
        #expect(server.requests.allSatisfy { $0.header("authorization")?.hasPrefix("OAuth ") == true })
    }
}
