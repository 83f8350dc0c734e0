@testable import CouchServer
import CouchCore
import CouchTestSupport
import Foundation
import Testing

/// Password checks under load: CouchDB 3.4's hashes take 600,000 iterations, and a client's
/// first requests often go out together, each carrying the same credentials.
@Suite struct PasswordCheckLoadTests {
    /// A user whose stored hash takes `iterations` to check (written pre-hashed, as CouchDB
    /// accepts user documents).
    private func addUser(_ name: String, password: String, iterations: Int, to server: TestServer) throws {
        let salt = Digest.randomHex(bytes: 16)
        let key = Digest.hex(Digest.pbkdf2(password: Array(password.utf8), salt: Array(salt.utf8),
                                           iterations: iterations, function: .sha256))
        let document = JSONValue.object([
            "_id": .string("org.couchdb.user:\(name)"), "name": .string(name), "type": "user", "roles": [],
            "password_scheme": "pbkdf2", "pbkdf2_prf": "sha256", "iterations": JSONValue(iterations),
            "salt": .string(salt), "derived_key": .string(key),
        ])
        let admin = basicAuthorization("root", "Root-pw-1")
        #expect(try server.request("PUT", "/_users/org.couchdb.user:\(name)", headers: [admin],
                                   body: document.serializedString()).status == 201)
        #expect(try server.request("PUT", "/db", headers: [admin]).status == 201)
        #expect(try server.request("PUT", "/db/_security", headers: [admin],
                                   body: #"{"members":{"names":["\#(name)"]}}"#).status == 200)
    }

    /// Many more requests than checks may run or wait at once (a quarter and a half of the
    /// listener's threads), all with the same fresh credentials: one check answers them all,
    /// where each used to run its own and those beyond the bound were refused with 503.
    @Test func aClientsFirstRequestsTogetherAllSucceed() throws {
        let server = try TestServer(configuration: .testing(admins: ["root": "Root-pw-1"]))
        defer { server.stop() }
        try addUser("bob", password: "bobs-pw", iterations: 200_000, to: server)
        let requests = 3 * server.listener.configuration.threadCount / 2
        let statuses = Locked<[Int]>([])
        let finished = DispatchGroup()
        let go = DispatchSemaphore(value: 0)
        for _ in 0..<requests {
            finished.enter()
            Thread {
                go.wait()
                let status = (try? server.request("GET", "/db", headers: [basicAuthorization("bob", "bobs-pw")]).status) ?? 0
                statuses.withLock { $0.append(status) }
                finished.leave()
            }.start()
        }
        for _ in 0..<requests { go.signal() }
        finished.wait()
        #expect(statuses.withLock { $0 } == Array(repeating: 200, count: requests))
        // A wrong password together with them is still refused, and the right one still passes.
        #expect(try server.request("GET", "/db", headers: [basicAuthorization("bob", "bobs-PW")]).status == 401)
        #expect(try server.request("GET", "/db", headers: [basicAuthorization("bob", "bobs-pw")]).status == 200)
    }

    /// A flood of logins, each with other credentials (unknown users: each costs a check on the
    /// server's own 400,000-iteration decoy, and no lockout): beyond the bound they answer 503 at
    /// once rather than queue, and they queue apart from the database's slow requests, so an
    /// admin's `_find` on that database during the flood does not wait for it.
    @Test func aFloodOfLoginsIsBoundedAndLeavesTheDatabaseItsThreads() throws {
        var configuration = ServerConfiguration.testing(admins: ["root": "Root-pw-1"])
        configuration.authentication.iterations = 400_000
        let server = try TestServer(configuration: configuration)
        defer { server.stop() }
        let admin = basicAuthorization("root", "Root-pw-1")
        #expect(try server.request("PUT", "/db", headers: [admin]).status == 201)
        let flood = 3 * server.listener.configuration.threadCount / 2
        let answers = Locked<[(status: Int, at: Date)]>([])
        let finished = DispatchGroup()
        let go = DispatchSemaphore(value: 0)
        for index in 0..<flood {
            finished.enter()
            Thread {
                go.wait()
                let status = (try? server.request("GET", "/db", headers: [basicAuthorization("nobody\(index)", "password \(index)")]).status) ?? 0
                answers.withLock { $0.append((status, Date())) }
                finished.leave()
            }.start()
        }
        for _ in 0..<flood { go.signal() }
        usleep(20_000)
        let find = try server.request("POST", "/db/_find", headers: [admin], body: #"{"selector":{}}"#)
        let findAnswered = Date()
        finished.wait()
        #expect(find.status == 200)
        let statuses = answers.withLock { $0.map(\.status) }
        #expect(statuses.allSatisfy { $0 == 401 || $0 == 503 }, "\(statuses)")
        #expect(statuses.contains(503), "the bound on checks held: \(statuses)")
        #expect(statuses.contains(401))
        // The checks take tens of milliseconds each, four at a time: had the `_find` queued
        // behind the logins, most of them would have been answered before it.
        let refusedLogins = answers.withLock { $0.filter { $0.status == 401 } }
        let before = refusedLogins.filter { $0.at < findAnswered }.count
        #expect(before * 2 < refusedLogins.count, "\(before) of \(refusedLogins.count) logins answered before the _find")
    }
}
