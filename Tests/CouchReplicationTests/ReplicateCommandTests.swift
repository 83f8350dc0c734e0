import CouchCore
import CouchTestSupport
import Foundation
import Testing

/// `couchette replicate --server`: the replication runs on a server, the command shows
/// its progress from the server's live event feed and prints the server's answer.
@Suite(.serialized) struct ReplicateCommandTests {
    /// Runs `couchette` with `arguments`; its exit status, standard output and error.
    func couchette(_ arguments: [String]) async throws -> (status: Int32, output: String, errors: String) {
        try await offPool {
            let directory = TestServer.makeTemporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let (outputPath, errorPath) = (directory + "/stdout", directory + "/stderr")
            _ = FileManager.default.createFile(atPath: outputPath, contents: nil)
            _ = FileManager.default.createFile(atPath: errorPath, contents: nil)
            let process = ChildProcess()
            process.executableURL = ServerProcess.executable
            process.currentDirectoryURL = URL(fileURLWithPath: directory)
            process.arguments = arguments
            process.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: outputPath))
            process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: errorPath))
            try launch(process)
            process.waitUntilExit()
            return (process.terminationStatus, (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? "",
                    (try? String(contentsOfFile: errorPath, encoding: .utf8)) ?? "")
        }
    }

    @Test func aReplicationOnAServerShowsItsProgressFromTheEventFeed() async throws {
        let server = try TestServer()
        defer { server.stop() }
        try await server.call("PUT", "/source")
        try await server.fill("source", count: 200)
        let run = try await couchette(["replicate", "--server", server.url, "source", "copy", "--create-target", "--progress"])
        #expect(run.status == 0, "\(run.errors)")
        let answer = try JSONValue.parse(Array(run.output.utf8))
        #expect(answer["ok"] == true && answer["history"]?[0]?["docs_written"] == 200)
        #expect(run.errors.contains("200/200 changes  completed"), "the job's last event: \(run.errors)")
        #expect(try await server.documentCount("copy") == 200)

        let missing = try await couchette(["replicate", "--server", server.url, "nothing", "copy2"])
        #expect(missing.status == 1)
        #expect(try JSONValue.parse(Array(missing.output.utf8))["error"]?.stringValue != nil, "\(missing.output)")
    }

    /// `--attachments on_demand`: saved as a `_replicator` document on the server, which then
    /// fetches each body from the source when it is first read; refused without a server.
    @Test func attachmentsOnDemandAreSavedOnTheServerAndFetchedWhenRead() async throws {
        let (server, peer) = (try TestServer(), try TestServer())
        defer { server.stop(); peer.stop() }
        try await peer.call("PUT", "/notes")
        let upload = try await offPool {
            try peer.request("PUT", "/notes/photo/photo.txt", headers: [("Content-Type", "text/plain")], body: "a large picture")
        }
        #expect(upload.status == 201)

        let run = try await couchette(["replicate", "--server", server.url, peer.url + "/notes", "lazy",
                                       "--create-target", "--attachments", "on_demand"])
        #expect(run.status == 0, "\(run.output) \(run.errors)")
        #expect(try JSONValue.parse(Array(run.output.utf8))["state"] == "completed", "\(run.output)")
        #expect(try await server.call("GET", "/_replicator/cli-notes-lazy").json["attachments"] == "on_demand")
        // Only the metadata came: no body is stored until a read asks for it.
        #expect(try server.blobFiles("lazy").isEmpty)
        #expect(try await server.call("GET", "/lazy/photo").json["_attachments"]?["photo.txt"]?["stub"] == true)
        let body = try await offPool { try server.request("GET", "/lazy/photo/photo.txt") }
        #expect(body.status == 200 && String(decoding: body.body, as: UTF8.self) == "a large picture")
        #expect(try server.blobFiles("lazy").count == 1)

        let directory = TestServer.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let alone = try await couchette(["replicate", "--data-dir", directory, peer.url + "/notes", "lazy",
                                         "--attachments", "on_demand"])
        #expect(alone.status != 0 && alone.errors.contains("needs a server"), "\(alone.errors)")
        let wrong = try await couchette(["replicate", "--server", server.url, "a", "b", "--attachments", "some"])
        #expect(wrong.status != 0 && wrong.errors.contains("all or on_demand"), "\(wrong.errors)")
    }
}
