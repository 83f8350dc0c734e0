import CouchCore
import CouchTestSupport
import Foundation
import Testing

/// Replication to a peer behind HTTPS: a self-signed certificate made with the `openssl`
/// command and a small TLS-terminating proxy (Support/tls_proxy.py) in front of a Couchette.
@Suite(.serialized) struct TLSReplicationTests {
    /// Runs a shell command and returns its standard output; throws if it fails.
    @discardableResult
    static func shell(_ command: String) throws -> String {
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", command + " 2>/dev/null"]
        let output = Pipe()
        process.standardOutput = output
        try launch(process)
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw TestServerError.unexpected("failed: \(command)") }
        return String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    @Test func replicatesOverHTTPSTrustingAGivenCAAndAPinnedKey() async throws {
        let (a, b) = (try TestServer(), try TestServer())
        defer { a.stop(); b.stop() }
        let directory = TestServer.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let (cert, key, portFile) = (directory + "/cert.pem", directory + "/key.pem", directory + "/port")
        try Self.shell("openssl req -x509 -newkey rsa:2048 -nodes -keyout \(key) -out \(cert) -days 1 "
                       + "-subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1")
        let pin = "sha256//" + (try Self.shell(
            "openssl x509 -in \(cert) -pubkey -noout | openssl pkey -pubin -outform der | openssl dgst -sha256 -binary | base64"))
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Support/tls_proxy.py").path
        let proxy = ChildProcess()
        proxy.executableURL = URL(fileURLWithPath: "/bin/sh")
        // Its output goes to files, never to the test runner's pipes, which it would hold open.
        proxy.arguments = ["-c", "exec python3 \(script) \(cert) \(key) \(b.port) > \(portFile) 2>/dev/null </dev/null"]
        try launch(proxy)
        // SIGKILL: the test process may run with SIGTERM blocked, which children inherit.
        defer { kill(proxy.processIdentifier, SIGKILL) }
        var proxyPort: Int?
        for _ in 0..<100 where proxyPort == nil {
            proxyPort = (try? String(contentsOfFile: portFile, encoding: .utf8)).flatMap {
                Int($0.trimmingCharacters(in: .whitespacesAndNewlines))
            }
            if proxyPort == nil { try await Task.sleep(nanoseconds: 50_000_000) }
        }
        let target = "https://127.0.0.1:\(try #require(proxyPort))/target"
        try await a.call("PUT", "/source")
        try await a.fill("source", count: 20)

        // An unknown authority is refused at once, and so is a key other than the pinned one.
        let untrusted = try await a.replicate(["source": "source", "target": JSONValue(target), "create_target": true])
        #expect(untrusted.json["error"] == "forbidden", "\(untrusted.json.serializedString())")
        // With credentials, the refusal comes from the login (`POST /_session`): forbidden too.
        let withCredentials = target.replacingOccurrences(of: "https://", with: "https://admin:secret@")
        let untrustedLogin = try await a.replicate(["source": "source", "target": JSONValue(withCredentials), "create_target": true])
        #expect(untrustedLogin.json["error"] == "forbidden", "\(untrustedLogin.json.serializedString())")
        let wrongPin = try await a.replicate([
            "source": "source", "create_target": true,
            "target": ["url": JSONValue(target), "ca_file": JSONValue(cert),
                       "pinned_public_key": "sha256//AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="],
        ])
        #expect(wrongPin.json["error"] == "forbidden", "\(wrongPin.json.serializedString())")

        let trusted = try await a.replicate([
            "source": "source", "create_target": true,
            "target": ["url": JSONValue(target), "ca_file": JSONValue(cert), "pinned_public_key": JSONValue(pin)],
        ])
        #expect(trusted.json["ok"] == true, "\(trusted.json.serializedString())")
        #expect(try await b.documentCount("target") == 20)
    }
}
