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

    /// Sends `count` `GET`s at once, each from a thread of its own with the header `headers`
    /// gives for its index; returns every answer's status and when it came, once all came.
    private func sendAtOnce(_ count: Int, to server: TestServer, path: String = "/db",
                            headers: @escaping @Sendable (Int) -> (String, String)) -> [(status: Int, at: Date)] {
        let answers = Locked<[(status: Int, at: Date)]>([])
        let finished = DispatchGroup()
        let go = DispatchSemaphore(value: 0)
        for index in 0..<count {
            finished.enter()
            Thread {
                go.wait()
                let status = (try? server.request("GET", path, headers: [headers(index)]).status) ?? 0
                answers.withLock { $0.append((status, Date())) }
                finished.leave()
            }.start()
        }
        for _ in 0..<count { go.signal() }
        finished.wait()
        return answers.withLock { $0 }
    }

    /// Many more requests than checks may run or wait at once (a quarter and a half of the
    /// listener's threads), all with the same fresh credentials: one check answers them all,
    /// where each used to run its own and those beyond the bound were refused with 503.
    @Test func aClientsFirstRequestsTogetherAllSucceed() throws {
        let server = try TestServer(configuration: .testing(admins: ["root": "Root-pw-1"]))
        defer { server.stop() }
        try addUser("bob", password: "bobs-pw", iterations: 200_000, to: server)
        let requests = 3 * server.listener.configuration.threadCount / 2
        let answers = sendAtOnce(requests, to: server) { _ in basicAuthorization("bob", "bobs-pw") }
        #expect(answers.map(\.status) == Array(repeating: 200, count: requests))
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
        let found = Locked<(status: Int, at: Date)>((0, .distantFuture))
        let findDone = DispatchSemaphore(value: 0)
        Thread {
            usleep(20_000)   // the logins first
            let status = (try? server.request("POST", "/db/_find", headers: [admin], body: #"{"selector":{}}"#).status) ?? 0
            found.withLock { $0 = (status, Date()) }
            findDone.signal()
        }.start()
        let answers = sendAtOnce(flood, to: server) { basicAuthorization("nobody\($0)", "password \($0)") }
        findDone.wait()
        let find = found.withLock { $0 }
        let findAnswered = find.at
        #expect(find.status == 200)
        let statuses = answers.map(\.status)
        #expect(statuses.allSatisfy { $0 == 401 || $0 == 503 }, "\(statuses)")
        #expect(statuses.contains(503), "the bound on checks held: \(statuses)")
        #expect(statuses.contains(401))
        // The checks take tens of milliseconds each, four at a time: had the `_find` queued
        // behind the logins, most of them would have been answered before it.
        let refusedLogins = answers.filter { $0.status == 401 }
        let before = refusedLogins.filter { $0.at < findAnswered }.count
        #expect(before * 2 < refusedLogins.count, "\(before) of \(refusedLogins.count) logins answered before the _find")
    }
}
