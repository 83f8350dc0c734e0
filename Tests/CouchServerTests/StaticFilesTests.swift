import CouchCore
import CouchServer
import CouchTestSupport
import Foundation
import Testing

/// `/_utils/`: the admin page's files, their types and validators, and nothing beyond them.
@Suite struct StaticFilesTests {
    /// A public directory with a few files, a sub-folder, and a secret beside it (outside).
    struct Fixture {
        let outside: String
        let root: String
        let server: TestServer

        init() throws {
            outside = TestServer.makeTemporaryDirectory()
            root = outside + "/public"
            let files = FileManager.default
            try files.createDirectory(atPath: root + "/sub", withIntermediateDirectories: true)
            try "<!doctype html><title>page</title>".write(toFile: root + "/index.html", atomically: true, encoding: .utf8)
            try "export const x = 1;".write(toFile: root + "/app.js", atomically: true, encoding: .utf8)
            try "body { color: red }".write(toFile: root + "/style.css", atomically: true, encoding: .utf8)
            try "<svg xmlns=\"http://www.w3.org/2000/svg\"/>".write(toFile: root + "/icon.svg", atomically: true, encoding: .utf8)
            try "plain bytes".write(toFile: root + "/data.bin", atomically: true, encoding: .utf8)
            try "<p>sub</p>".write(toFile: root + "/sub/index.html", atomically: true, encoding: .utf8)
            try "hidden".write(toFile: root + "/.hidden", atomically: true, encoding: .utf8)
            try "TOP SECRET".write(toFile: outside + "/secret.txt", atomically: true, encoding: .utf8)
            try files.createSymbolicLink(atPath: root + "/escape.txt", withDestinationPath: outside + "/secret.txt")
            var configuration = ServerConfiguration.testing(admins: ["admin": "pw"])
            configuration.publicDirectory = root
            server = try TestServer(configuration: configuration)
        }

        func stop() {
            server.stop()
            try? FileManager.default.removeItem(atPath: outside)
        }
    }

    @Test func theFolderRedirectsThenAnswersItsIndex() throws {
        let fixture = try Fixture()
        defer { fixture.stop() }
        let bare = try fixture.server.request("GET", "/_utils")
        #expect(bare.status == 301)
        #expect(bare.header("Location") == "/_utils/")
        // Anonymous, even with an admin configured: the page signs in through the API.
        let index = try fixture.server.request("GET", "/_utils/")
        #expect(index.status == 200)
        #expect(index.header("Content-Type") == "text/html; charset=utf-8")
        #expect(index.text == "<!doctype html><title>page</title>")
        #expect(try fixture.server.request("GET", "/_utils/index.html").text == index.text)
        #expect(try fixture.server.request("GET", "/_utils/sub/").text == "<p>sub</p>")
        let subBare = try fixture.server.request("GET", "/_utils/sub")
        #expect(subBare.status == 301)
        #expect(subBare.header("Location") == "/_utils/sub/")
    }

    @Test func filesCarryTheirContentTypes() throws {
        let fixture = try Fixture()
        defer { fixture.stop() }
        let expected = [
            "app.js": "text/javascript; charset=utf-8",
            "style.css": "text/css; charset=utf-8",
            "icon.svg": "image/svg+xml",
            "data.bin": "application/octet-stream",
        ]
        for (name, type) in expected {
            let response = try fixture.server.request("GET", "/_utils/" + name)
            #expect(response.status == 200, "\(name)")
            #expect(response.header("Content-Type") == type, "\(name)")
            #expect(response.body == Array(try String(contentsOfFile: fixture.root + "/" + name, encoding: .utf8).utf8))
        }
        let head = try fixture.server.request("HEAD", "/_utils/app.js")
        #expect(head.status == 200)
        #expect(head.body.isEmpty)
        #expect(head.header("Content-Type") == "text/javascript; charset=utf-8")
        #expect(try fixture.server.request("POST", "/_utils/app.js", body: "{}").status == 405)
    }

    @Test func anETagAnswers304UntilTheFileChanges() throws {
        let fixture = try Fixture()
        defer { fixture.stop() }
        let first = try fixture.server.request("GET", "/_utils/app.js")
        let etag = try #require(first.header("ETag"))
        #expect(first.header("Cache-Control") == "no-cache")
        let cached = try fixture.server.request("GET", "/_utils/app.js", headers: [("If-None-Match", etag)])
        #expect(cached.status == 304)
        #expect(cached.body.isEmpty)
        #expect(cached.header("ETag") == etag)
        #expect(try fixture.server.request("GET", "/_utils/app.js", headers: [("If-None-Match", "\"other\"")]).status == 200)

        try "export const x = 22;".write(toFile: fixture.root + "/app.js", atomically: true, encoding: .utf8)
        let changed = try fixture.server.request("GET", "/_utils/app.js", headers: [("If-None-Match", etag)])
        #expect(changed.status == 200)
        #expect(changed.text == "export const x = 22;")
        #expect(changed.header("ETag") != etag)
    }

    @Test func missingFilesAnswerCouchDBsNotFound() throws {
        let fixture = try Fixture()
        defer { fixture.stop() }
        for path in ["/_utils/nothing.js", "/_utils/sub/nothing.html", "/_utils/.hidden", "/_utils/app.js/more"] {
            let response = try fixture.server.request("GET", path)
            #expect(response.status == 404, "\(path)")
            #expect(response.header("Content-Type") == "application/json", "\(path)")
            #expect(try JSONValue.parse(response.body) == ["error": "not_found", "reason": "missing"], "\(path)")
        }
    }

    @Test func nothingOutsideThePublicDirectoryIsServed() throws {
        let fixture = try Fixture()
        defer { fixture.stop() }
        let attempts = ["/_utils/../secret.txt", "/_utils/%2e%2e/secret.txt", "/_utils/%2E%2E%2Fsecret.txt",
                        "/_utils/sub/..%2F..%2Fsecret.txt", "/_utils/sub/../../secret.txt", "/_utils/escape.txt",
                        "/_utils/%2Fetc%2Fpasswd", "/_utils//etc/passwd", "/_utils/sub%2F..%2F..%2Fsecret.txt"]
        for path in attempts {
            let response = try fixture.server.request("GET", path)
            #expect(!response.text.contains("TOP SECRET"), "\(path)")
            #expect(!response.text.contains("root:"), "\(path)")
            #expect(response.status == 404 || response.status == 400, "\(path): \(response.status)")
        }
        // The secret itself is readable: the refusals above are the server's doing.
        #expect(try String(contentsOfFile: fixture.root + "/escape.txt", encoding: .utf8) == "TOP SECRET")
    }

    /// `vendor/codemirror/...` comes from CodeMirror's directory (`[couchette] codemirror_dir`,
    /// Debian's package by default) with the same refusals; the public directory's own copy wins.
    @Test func vendorFilesComeFromTheirDirectoryAndNoFurther() throws {
        let outside = TestServer.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: outside) }
        let files = FileManager.default
        let root = outside + "/public", vendor = outside + "/codemirror"
        try files.createDirectory(atPath: root + "/vendor/codemirror/mode", withIntermediateDirectories: true)
        try files.createDirectory(atPath: vendor + "/lib", withIntermediateDirectories: true)
        try "<p>page</p>".write(toFile: root + "/index.html", atomically: true, encoding: .utf8)
        try "var CodeMirror;".write(toFile: vendor + "/lib/codemirror.js", atomically: true, encoding: .utf8)
        try ".CodeMirror {}".write(toFile: vendor + "/lib/codemirror.css", atomically: true, encoding: .utf8)
        try "local copy".write(toFile: root + "/vendor/codemirror/mode/own.js", atomically: true, encoding: .utf8)
        try "TOP SECRET".write(toFile: outside + "/secret.txt", atomically: true, encoding: .utf8)
        try files.createSymbolicLink(atPath: vendor + "/escape.js", withDestinationPath: outside + "/secret.txt")
        try files.createSymbolicLink(atPath: vendor + "/codemirror.js", withDestinationPath: "lib/codemirror.js")
        var configuration = ServerConfiguration.testing(admins: ["admin": "pw"])
        configuration.publicDirectory = root
        configuration.codeMirrorDirectory = vendor
        let server = try TestServer(configuration: configuration)
        defer { server.stop() }

        let script = try server.request("GET", "/_utils/vendor/codemirror/lib/codemirror.js")
        #expect(script.status == 200)
        #expect(script.text == "var CodeMirror;")
        #expect(script.header("Content-Type") == "text/javascript; charset=utf-8")
        #expect(script.header("Content-Security-Policy")?.hasPrefix("default-src 'self'") == true)
        #expect(try server.request("GET", "/_utils/vendor/codemirror/lib/codemirror.css").header("Content-Type") == "text/css; charset=utf-8")
        // A link that stays inside the vendor directory is followed, as Debian's package has them.
        #expect(try server.request("GET", "/_utils/vendor/codemirror/codemirror.js").text == "var CodeMirror;")
        #expect(try server.request("GET", "/_utils/vendor/codemirror/mode/own.js").text == "local copy")
        for path in ["/_utils/vendor/codemirror/escape.js", "/_utils/vendor/codemirror/../../secret.txt",
                     "/_utils/vendor/codemirror/%2e%2e/secret.txt", "/_utils/vendor/codemirror/..%2F..%2Fsecret.txt",
                     "/_utils/vendor/codemirror/lib/nothing.js", "/_utils/vendor/other/lib/codemirror.js",
                     "/_utils/vendor/codemirror", "/_utils/vendor/codemirror/"] {
            let response = try server.request("GET", path)
            #expect(!response.text.contains("TOP SECRET"), "\(path)")
            #expect(response.status == 404 || response.status == 400 || response.status == 301, "\(path): \(response.status)")
        }
        #expect(try server.request("GET", "/_utils/vendor/codemirror/").status == 404)
    }

    /// The binary's `--public-dir` and `COUCHETTE_COUCHETTE__PUBLIC_DIR` choose the folder.
    @Test func theCommandLineChoosesTheFolder() throws {
        let directory = TestServer.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try "<p>from the option</p>".write(toFile: directory + "/index.html", atomically: true, encoding: .utf8)
        let byOption = try ServerProcess(arguments: ["--public-dir", directory])
        let answer = try httpRequest(port: byOption.port, "GET", "/_utils/")
        let log = byOption.stop()
        #expect(answer.text == "<p>from the option</p>")
        #expect(log.contains("admin page at http://127.0.0.1:\(byOption.port)/_utils/"))

        let byEnvironment = try ServerProcess(environment: ["COUCHETTE_COUCHETTE__PUBLIC_DIR": directory])
        defer { byEnvironment.stop() }
        #expect(try httpRequest(port: byEnvironment.port, "GET", "/_utils/index.html").text == "<p>from the option</p>")
    }

    /// Without `--public-dir` the server finds the repository's own `Public/` (this is a
    /// build from the source tree), and every file there has a proper type.
    @Test func theRepositorysPageIsFoundAndTyped() throws {
        let server = try TestServer()
        defer { server.stop() }
        var repository = URL(fileURLWithPath: #filePath)
        for _ in 0..<3 { repository.deleteLastPathComponent() }
        let publicDirectory = repository.path + "/Public"
        let index = try server.request("GET", "/_utils/")
        #expect(index.status == 200)
        #expect(index.text == (try String(contentsOfFile: publicDirectory + "/index.html", encoding: .utf8)))
        let files = try #require(FileManager.default.enumerator(atPath: publicDirectory)?.allObjects as? [String])
        var checked = 0
        for file in files where !file.hasPrefix(".") && !file.hasSuffix(".md") {
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: publicDirectory + "/" + file, isDirectory: &isDirectory),
                  !isDirectory.boolValue else { continue }
            let response = try server.request("GET", "/_utils/" + file)
            #expect(response.status == 200, "\(file)")
            #expect(response.header("Content-Type") != "application/octet-stream", "\(file)")
            checked += 1
        }
        #expect(checked >= 3)
    }
}
