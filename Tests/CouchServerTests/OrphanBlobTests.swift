import CouchCore
import CouchTestSupport
import Foundation
import Testing

/// Attachment bodies a crash leaves behind (a `_bulk_docs` killed after storing some of its
/// attachments, before its revisions committed) are gone once the database is opened again,
/// without a compaction; and a body a committed revision refers to stays, even one such a
/// cut-short write stored first.
@Suite struct OrphanBlobTests {
    private static func sha256(_ bytes: [UInt8]) -> String {
        let digest = StreamingDigest(.sha256)
        digest.update(bytes)
        return Digest.hex(digest.finish())
    }

    /// The blob store must hold exactly the bodies of the attachments the database serves,
    /// and each acknowledged attachment must be served byte for byte.
    private func verify(port: Int, directory: String, acknowledged: [String: [UInt8]], cycle: Int) throws {
        let listing = try JSONValue.parse(try httpRequest(port: port, "GET", "/db/_all_docs?include_docs=true").body)
        var served: [String: [UInt8]] = [:]
        for row in listing["rows"]?.arrayValue ?? [] {
            guard let id = row["id"]?.stringValue else { continue }
            for name in row["doc"]?["_attachments"]?.objectValue?.keys ?? [] {
                let response = try httpRequest(port: port, "GET", "/db/\(id)/\(name)")
                #expect(response.status == 200, "cycle \(cycle): \(id)/\(name)")
                served["\(id)/\(name)"] = response.body
            }
        }
        for (path, bytes) in acknowledged {
            #expect(served[path] == bytes, "cycle \(cycle): \(path) acknowledged, not served whole")
        }
        let stored = Set(DatabaseFiles.blobs(of: "db", in: directory).stored)
        let referenced = Set(served.values.map(Self.sha256))
        #expect(stored == referenced, "cycle \(cycle): \(stored.subtracting(referenced).count) bodies no document refers to, \(referenced.subtracting(stored).count) missing")
    }

    @Test func bodiesOfWritesACrashCutShortAreGoneAfterARestart() throws {
        let directory = TestServer.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var generator = SplitMix(77)
        func bytes(_ count: Int) -> [UInt8] { (0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) } }
        var acknowledged: [String: [UInt8]] = [:]
        var cutShort = 0
        var cycle = 0
        while cycle < 8 && (cutShort == 0 || cycle < 3) {
            let server = try ServerProcess(arguments: ["--log-level", "error"], directory: directory)
            let port = server.port
            if cycle == 0 { #expect(try httpRequest(port: port, "PUT", "/db").status == 201) }
            try verify(port: port, directory: directory, acknowledged: acknowledged, cycle: cycle)

            // A batch of 60 documents with 32 KB attachments, the first one's body shared with
            // a document written while the batch is being stored.
            let shared = bytes(32 * 1024)
            var batch: [[UInt8]] = [shared]
            for _ in 1..<60 { batch.append(bytes(32 * 1024)) }
            let documents = batch.enumerated().map { index, body in
                #"{"_id":"c\#(cycle)-\#(index)","_attachments":{"a.bin":{"content_type":"application/octet-stream","data":"\#(Base64.encode(body))"}}}"#
            }
            let request = Array((#"{"docs":["# + documents.joined(separator: ",") + "]}").utf8)
            let answered = Answer()
            let sender = Thread {
                let response = try? httpRequest(port: port, "POST", "/db/_bulk_docs",
                                                headers: [("Content-Type", "application/json")], body: request)
                answered.set(response?.status)
            }
            sender.start()
            // Once the batch has stored the shared body, a document refers to it, then the crash.
            let sharedPath = directory + "/db.attachments/" + Self.sha256(shared)
            let deadline = Date().addingTimeInterval(60)
            while !FileManager.default.fileExists(atPath: sharedPath), Date() < deadline { usleep(1000) }
            let upload = try httpRequest(port: port, "PUT", "/db/shared\(cycle)/s.bin",
                                         headers: [("Content-Type", "application/octet-stream")], body: shared)
            #expect(upload.status == 201)
            acknowledged["shared\(cycle)/s.bin"] = shared
            kill(server.process.processIdentifier, SIGKILL)
            server.process.waitUntilExit()
            answered.wait()
            _ = server.stop(keepData: true)
            if answered.status == 201 {
                for (index, body) in batch.enumerated() { acknowledged["c\(cycle)-\(index)/a.bin"] = body }
            }
            // Marked bodies are those of writes the crash cut short.
            let marks = (try? FileManager.default.contentsOfDirectory(atPath: directory + "/db.attachments/pending")) ?? []
            if !marks.isEmpty { cutShort += 1 }
            cycle += 1
        }
        #expect(cutShort > 0, "no crash cut a write short in \(cycle) cycles")
        let server = try ServerProcess(arguments: ["--log-level", "error"], directory: directory)
        defer { server.stop(keepData: true) }
        try verify(port: server.port, directory: directory, acknowledged: acknowledged, cycle: cycle)
        #expect(((try? FileManager.default.contentsOfDirectory(atPath: directory + "/db.attachments/pending")) ?? []) == [])
    }

    /// The status a request thread got (nil: no answer), once it is done.
    private final class Answer: @unchecked Sendable {
        private let done = DispatchSemaphore(value: 0)
        private(set) var status: Int?
        func set(_ status: Int?) {
            self.status = status
            done.signal()
        }
        func wait() { done.wait() }
    }
}
