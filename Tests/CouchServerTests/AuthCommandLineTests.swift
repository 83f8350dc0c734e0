import CouchCore
import CouchTestSupport
import Foundation
import Testing

/// The `couchette` command itself, run as a subprocess: what it logs, what it keeps on
/// disk and when it refuses to start.
@Suite struct AuthCommandLineTests {
    /// The `couchette` built beside this test binary.
    static func executable() throws -> String {
        let testBinary = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
        let path = URL(fileURLWithPath: testBinary).deletingLastPathComponent().appendingPathComponent("couchette").path
        guard FileManager.default.isExecutableFile(atPath: path) else {
            throw TestServerError.unexpected("no couchette executable at \(path); build with --build-tests")
        }
        return path
    }

    /// A running `couchette serve`, its output in files.
    final class Subprocess {
        let process = ChildProcess()
        let output: String
        let errors: String
        private(set) var port = 0

        init(_ arguments: [String], directory: String) throws {
            output = directory + "/stdout.txt"
            errors = directory + "/stderr.txt"
            _ = FileManager.default.createFile(atPath: output, contents: nil)
            _ = FileManager.default.createFile(atPath: errors, contents: nil)
            process.executableURL = URL(fileURLWithPath: try AuthCommandLineTests.executable())
            process.arguments = arguments
            process.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: output))
            process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: errors))
            try launch(process)
        }

        /// Waits for the banner and reads the port from it.
        func waitUntilListening() throws {
            for _ in 0..<200 {
                let text = (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
                if let range = text.range(of: "http://127.0.0.1:"),
                   let port = Int(text[range.upperBound...].prefix { $0.isNumber }) {
                    self.port = port
                    return
                }
                guard process.isRunning else { break }
                Thread.sleep(forTimeInterval: 0.05)
            }
            throw TestServerError.unexpected("couchette did not start: \(logs)")
        }

        func stop() {
            if process.isRunning { process.terminate() }
            process.waitUntilExit()
        }

        var logs: String {
            ((try? String(contentsOfFile: output, encoding: .utf8)) ?? "") + ((try? String(contentsOfFile: errors, encoding: .utf8)) ?? "")
        }
    }

    @Test func passwordsAppearNeitherInLogsNorOnDisk() throws {
        let directory = TestServer.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let data = directory + "/data"
        let adminPassword = "Canary-Admin-Pw-7d1e"
        let configPassword = "Canary-Config-Pw-42ab"
        let userPassword = "Canary-User-Pw-99c3"
        let wrongPassword = "Canary-Wrong-Pw-0f0f"
        let config = directory + "/local.ini"
        try "[chttpd_auth]\niterations = 10\n[admins]\nops = \(configPassword)\n".write(toFile: config, atomically: true, encoding: .utf8)

        let couchette = try Subprocess(["serve", "--port", "0", "--data-dir", data, "--log-level", "trace",
                                        "--config", config, "--admin", "admin:\(adminPassword)"], directory: directory)
        defer { couchette.stop() }
        try couchette.waitUntilListening()
        let port = couchette.port
        let admin = basicAuthorization("admin", adminPassword)
        #expect(try httpRequest(port: port, "PUT", "/db", headers: [admin]).status == 201)
        #expect(try httpRequest(port: port, "GET", "/_session", headers: [basicAuthorization("ops", configPassword)]).status == 200)
        #expect(try httpRequest(port: port, "GET", "/db", headers: [basicAuthorization("admin", wrongPassword)]).status == 401)
        let signUp = #"{"name":"jan","password":"\#(userPassword)","roles":[],"type":"user"}"#
        #expect(try httpRequest(port: port, "PUT", "/_users/org.couchdb.user:jan", headers: [("Content-Type", "application/json")],
                                body: Array(signUp.utf8)).status == 201)
        #expect(try httpRequest(port: port, "POST", "/_session", headers: [("Content-Type", "application/json")],
                                body: Array(#"{"name":"jan","password":"\#(userPassword)"}"#.utf8)).status == 200)
        #expect(try httpRequest(port: port, "POST", "/_session", headers: [("Content-Type", "application/x-www-form-urlencoded")],
                                body: Array("name=jan&password=\(wrongPassword)".utf8)).status == 401)
        #expect(try httpRequest(port: port, "GET", "/_session?password=\(wrongPassword)").status == 200)
        // A name is the client's: one that carries a line break cannot forge a log line.
        #expect(try httpRequest(port: port, "POST", "/_session", headers: [("Content-Type", "application/json")],
                                body: Array(#"{"name":"eve\nforged line","password":"\#(wrongPassword)"}"#.utf8)).status == 401)
        couchette.stop()

        let logs = couchette.logs
        #expect(logs.contains("PUT /db 201"))
        #expect(logs.contains(#"authentication failed for user "admin""#))
        #expect(logs.contains(#"authentication failed for user "eve\nforged line""#))
        #expect(!logs.contains("\nforged line"))
        for password in [adminPassword, configPassword, userPassword, wrongPassword] {
            #expect(!logs.contains(password), "a password is in the logs")
            for file in allFileBytes(under: data) {
                #expect(!contains(file.bytes, password), "\(file.path)")
            }
        }
        // As CouchDB does with local.ini, the configuration file now holds a hash.
        let rewritten = try String(contentsOfFile: config, encoding: .utf8)
        #expect(!rewritten.contains(configPassword))
        #expect(rewritten.contains("ops = -pbkdf2:sha256-"))
    }

    @Test func theAdminPartyIsAnnouncedOnLoopbackAndRefusedElsewhere() throws {
        let directory = TestServer.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let party = try Subprocess(["serve", "--port", "0", "--data-dir", directory + "/data"], directory: directory)
        try party.waitUntilListening()
        party.stop()
        #expect(party.logs.contains("warning"))
        #expect(party.logs.contains("NO SERVER ADMIN IS CONFIGURED"))
        #expect(party.logs.contains("no web page (CORS is off)"))

        // With CORS for every origin and credentials (accepted, as CouchDB accepts it), the
        // warning says that any page may write.
        let browser = try Subprocess(["serve", "--port", "0", "--data-dir", directory + "/data3",
                                      "--cors-origins", "*", "--cors-credentials"], directory: directory)
        try browser.waitUntilListening()
        let page = "http://localhost:8000"
        let answer = try httpRequest(port: browser.port, "GET", "/", headers: [("Origin", page)])
        browser.stop()
        #expect(answer.header("Access-Control-Allow-Origin") == page)
        #expect(answer.header("Access-Control-Allow-Credentials") == "true")
        #expect(browser.logs.contains("pages from any origin (with credentials), may read and write every database"))

        let exposed = try Subprocess(["serve", "--port", "0", "--bind", "0.0.0.0", "--data-dir", directory + "/data2"],
                                     directory: directory)
        exposed.process.waitUntilExit()
        #expect(exposed.process.terminationStatus != 0)
        #expect(exposed.logs.contains("refusing to listen on 0.0.0.0 with no server admin"))
    }
}
