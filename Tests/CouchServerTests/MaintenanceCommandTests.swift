import CouchCore
import CouchTestSupport
import Foundation
import Testing

/// `couchette version` and `couchette compact`, run as a user runs them.
@Suite struct MaintenanceCommandTests {
    private func run(_ arguments: [String], executable: String? = nil) throws -> (status: Int32, output: String) {
        let process = ChildProcess()
        process.executableURL = executable.map(URL.init(fileURLWithPath:)) ?? ServerProcess.executable
        process.arguments = arguments
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        try launch(process)
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
    }

    /// `couchette --help` and each subcommand's help name the page of docs/ about it, and the
    /// page exists.
    @Test func helpPointsToTheGuide() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let expected = [[]: "configuration", ["serve"]: "configuration", ["replicate"]: "replication",
                        ["compact"]: "operations", ["dump"]: "operations", ["load"]: "operations",
                        ["version"]: "configuration"] as [[String]: String]
        for (subcommand, page) in expected {
            let help = try run(subcommand + ["--help"])
            #expect(help.status == 0)
            // The help is wrapped to the terminal's width: compare it with single spaces.
            let text = help.output.split(whereSeparator: \.isWhitespace).joined(separator: " ")
            #expect(text.contains("See docs/\(page).md."), "couchette \(subcommand.joined()) --help: \(help.output)")
            #expect(FileManager.default.fileExists(atPath: root.appendingPathComponent("docs/\(page).md").path))
        }
    }

    @Test func versionAndCompact() throws {
        let version = try run(["version"])
        #expect(version.status == 0)
        #expect(version.output.hasPrefix("Couchette ") && version.output.contains("SQLite 3."))

        let server = try ServerProcess()
        let port = server.port
        #expect(try httpRequest(port: port, "PUT", "/db").status == 201)
        var rev = ""
        for index in 0..<20 {
            let body = rev.isEmpty ? #"{"n":0}"# : #"{"_rev":"\#(rev)","n":\#(index)}"#
            let response = try httpRequest(port: port, "PUT", "/db/doc", headers: [("Content-Type", "application/json")],
                                           body: Array(body.utf8))
            rev = try JSONValue.parse(response.body)["rev"]?.stringValue ?? ""
        }
        // Beside a running server, it refuses (and leaves the database as it was).
        let refused = try run(["compact", "--data-dir", server.directory, "db"])
        #expect(refused.status != 0)
        #expect(refused.output.contains("in use by the Couchette server at http://127.0.0.1:\(port)/"), "\(refused.output)")
        #expect(refused.output.contains("/DB/_compact"), "\(refused.output)")
        #expect(try JSONValue.parse(try httpRequest(port: port, "GET", "/db/doc").body)["n"] == 19)
        _ = server.stop(keepData: true)
        let compacted = try run(["compact", "--data-dir", server.directory, "db"])
        #expect(compacted.status == 0, "\(compacted.output)")
        #expect(compacted.output.hasPrefix("db: "))
        #expect(try run(["compact", "--data-dir", server.directory, "Not A Name"]).status != 0)

        let restarted = try ServerProcess(directory: server.directory)
        defer { _ = restarted.stop() }
        let document = try JSONValue.parse(try httpRequest(port: restarted.port, "GET", "/db/doc").body)
        #expect(document["n"] == 19)
    }

    /// One owner per data directory: `couchette replicate` without `--server` beside a running
    /// server replicates through it (it used to open the files itself, and the server then
    /// counted 3 documents where there were more and refused every new one with 409), and
    /// the other tools refuse, naming the server.
    @Test func toolsBesideARunningServerGoThroughItOrRefuse() throws {
        let server = try ServerProcess()
        defer { _ = server.stop() }
        let port = server.port
        for name in ["src", "tgt"] { #expect(try httpRequest(port: port, "PUT", "/\(name)").status == 201) }
        for index in 0..<3 {
            #expect(try httpRequest(port: port, "PUT", "/tgt/old\(index)", body: Array("{}".utf8)).status == 201)
        }
        for index in 0..<10 {
            #expect(try httpRequest(port: port, "PUT", "/src/doc\(index)", body: Array(#"{"n":\#(index)}"#.utf8)).status == 201)
        }
        let replicated = try run(["replicate", "src", "tgt", "--data-dir", server.directory, "--no-progress"])
        #expect(replicated.status == 0, "\(replicated.output)")
        #expect(replicated.output.contains("replicating through it"), "\(replicated.output)")
        let info = try JSONValue.parse(try httpRequest(port: port, "GET", "/tgt").body)
        #expect(info["doc_count"] == 13, "\(info.serializedString())")
        #expect(try httpRequest(port: port, "PUT", "/tgt/new", body: Array("{}".utf8)).status == 201)
        #expect(try httpRequest(port: port, "GET", "/tgt/doc7").status == 200)
        for tool in [["dump", "tgt"], ["load", "tgt"], ["compact"]] {
            let refused = try run(tool + ["--data-dir", server.directory])
            #expect(refused.status != 0, "\(tool)")
            #expect(refused.output.contains("in use by the Couchette server at http://127.0.0.1:\(port)/"), "\(tool): \(refused.output)")
        }
    }

    /// Every leaf of every document of `database` with its history and attachment bytes,
    /// as `open_revs=all&revs=true&attachments=true` answers, keyed by document ID.
    private func revisionTrees(port: Int, _ database: String) throws -> [String: JSONValue] {
        let changes = try JSONValue.parse(try httpRequest(port: port, "GET", "/\(database)/_changes?style=all_docs").body)
        var trees: [String: JSONValue] = [:]
        for row in changes["results"]?.arrayValue ?? [] {
            let id = try #require(row["id"]?.stringValue)
            let response = try httpRequest(port: port, "GET", "/\(database)/\(id)?open_revs=all&revs=true&attachments=true",
                                           headers: [("Accept", "application/json")])
            #expect(response.status == 200)
            // Sorted by revision, so that the comparison does not depend on the order of leaves.
            let leaves = try JSONValue.parse(response.body).arrayValue ?? []
            trees[id] = .array(leaves.sorted { ($0["ok"]?["_rev"]?.stringValue ?? "") < ($1["ok"]?["_rev"]?.stringValue ?? "") })
        }
        return trees
    }

    @Test func dumpAndLoadKeepRevisionTreesAndAttachments() throws {
        let server = try ServerProcess()
        let port = server.port
        func send(_ method: String, _ path: String, _ body: String) throws -> JSONValue {
            try JSONValue.parse(try httpRequest(port: port, method, path, headers: [("Content-Type", "application/json")],
                                                body: Array(body.utf8)).body)
        }
        #expect(try httpRequest(port: port, "PUT", "/db").status == 201)
        // Plain documents, one deleted, one with a conflict (two branches), attachments text and binary.
        for index in 0..<30 { _ = try send("PUT", "/db/doc\(index)", #"{"n":\#(index),"s":"é\\n"}"#) }
        let deleted = try send("PUT", "/db/gone", #"{"n":1}"#)
        _ = try send("DELETE", "/db/gone?rev=\(deleted["rev"]?.stringValue ?? "")", "")
        _ = try send("POST", "/db/_bulk_docs", #"{"new_edits":false,"docs":[{"_id":"split","_rev":"2-aaa","v":"a","_revisions":{"start":2,"ids":["aaa","root"]}},{"_id":"split","_rev":"3-bbb","v":"b","_revisions":{"start":3,"ids":["bbb","mid","root"]}},{"_id":"split","_rev":"2-ccc","_deleted":true,"_revisions":{"start":2,"ids":["ccc","root"]}}]}"#)
        let binary = (0..<3000).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 3) }
        let withFiles = try send("PUT", "/db/files", #"{"_attachments":{"a.txt":{"content_type":"text/plain","data":"\#(Base64.encode(Array("hello".utf8)))"}}}"#)
        let put = try httpRequest(port: port, "PUT", "/db/files/b.bin?rev=\(withFiles["rev"]?.stringValue ?? "")",
                                  headers: [("Content-Type", "application/octet-stream")], body: binary)
        #expect(put.status == 201)
        let original = try revisionTrees(port: port, "db")
        #expect(original.count == 33)
        _ = server.stop(keepData: true)

        let dumpFile = server.directory + "/../dump-\(UUID().uuidString).ndjson"
        defer { try? FileManager.default.removeItem(atPath: dumpFile) }
        let dumped = try run(["dump", "--data-dir", server.directory, "db", "--output", dumpFile])
        #expect(dumped.status == 0, "\(dumped.output)")
        let lines = try String(contentsOfFile: dumpFile, encoding: .utf8).split(separator: "\n")
        #expect(lines.count == 34)
        #expect(try JSONValue.parse(Array(lines[0].utf8))["db_name"] == "db")
        #expect(try run(["load", "--data-dir", server.directory, "copy", "--input", dumpFile]).status != 0)
        let loaded = try run(["load", "--data-dir", server.directory, "copy", "--input", dumpFile, "--create"])
        #expect(loaded.status == 0, "\(loaded.output)")

        let restarted = try ServerProcess(directory: server.directory)
        defer { _ = restarted.stop() }
        let copy = try revisionTrees(port: restarted.port, "copy")
        #expect(Set(copy.keys) == Set(original.keys))
        for (id, leaves) in original { #expect(copy[id] == leaves, "\(id)") }
        let split = try #require(copy["split"]?.arrayValue)
        #expect(split.count == 3)  // 2-aaa, 3-bbb and the deleted 2-ccc
        let file = try httpRequest(port: restarted.port, "GET", "/copy/files/b.bin")
        #expect(file.body == binary)
        let info = try JSONValue.parse(try httpRequest(port: restarted.port, "GET", "/copy").body)
        #expect(info["doc_count"] == 32)
        #expect(info["doc_del_count"] == 1)
    }

    /// docker/ checked without a Docker engine: Dockerfile syntax, a non-root runtime with a
    /// health check, and every library `ldd` reports for the built binary installed by the
    /// runtime stage (scripts/check-docker).
    @Test func dockerfileCoversTheBinarysLibraries() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let check = try run([root.appendingPathComponent("scripts/check-docker").path, ServerProcess.executable.path],
                            executable: "/usr/bin/python3")
        #expect(check.status == 0, "\(check.output)")
        #expect(check.output.contains("docker/ checked"))
    }
}
