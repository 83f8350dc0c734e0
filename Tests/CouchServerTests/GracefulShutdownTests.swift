import CouchCore
import CouchTestSupport
import Foundation
import Testing

/// SIGTERM to a real `couchette serve` while clients write and a `_replicator` job runs:
/// no acknowledged write is lost, the process exits 0 promptly, and the replication starts
/// again from its checkpoint.
@Suite struct GracefulShutdownTests {
    private final class Acknowledged: @unchecked Sendable {
        let lock = NSLock()
        var ids: [String] = []
        var stop = false
        func add(_ id: String) { lock.withLock { ids.append(id) } }
        var stopped: Bool { lock.withLock { stop } }
    }

    private func json(_ port: Int, _ method: String, _ path: String, _ body: String? = nil) throws -> JSONValue {
        let response = try httpRequest(port: port, method, path, headers: [("Content-Type", "application/json")],
                                       body: body.map { Array($0.utf8) })
        return try JSONValue.parse(response.body)
    }

    private func docCount(_ port: Int, _ database: String) -> Int {
        (try? json(port, "GET", "/\(database)"))?["doc_count"]?.intValue ?? -1
    }

    private func waitUntil(seconds: Double, _ condition: () -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if condition() { return true }
            usleep(50_000)
        }
        return condition()
    }

    @Test func sigtermDuringWritesAndReplication() throws {
        let server = try ServerProcess(arguments: ["--log-level", "warning"])
        let port = server.port
        for name in ["source", "target"] {
            #expect(try httpRequest(port: port, "PUT", "/\(name)").status == 201)
        }
        _ = try httpRequest(port: port, "PUT", "/_replicator")
        let job = try json(port, "PUT", "/_replicator/job",
                           #"{"source":"source","target":"target","continuous":true,"checkpoint_interval":500}"#)
        #expect(job["ok"] == true, "\(job)")

        // Four writers, each on its own connection, until the server goes away.
        let acknowledged = Acknowledged()
        let writers = DispatchGroup()
        for writer in 0..<4 {
            writers.enter()
            Thread {
                defer { writers.leave() }
                guard let connection = try? HTTPTestConnection(port: port, timeout: 10) else { return }
                defer { connection.close() }
                var index = 0
                while !acknowledged.stopped {
                    let id = "w\(writer)-\(index)"
                    index += 1
                    guard let response = try? connection.request("PUT", "/source/\(id)",
                                                                 headers: [("Content-Type", "application/json")],
                                                                 body: Array(#"{"n":\#(index)}"#.utf8)) else { return }
                    if response.status == 201 { acknowledged.add(id) } else if response.status >= 500 { return }
                }
            }.start()
        }
        // Let the replication copy some of it, then stop the server in the middle.
        #expect(waitUntil(seconds: 20) { docCount(port, "target") >= 100 })
        let signalled = Date()
        server.process.terminate()
        server.process.waitUntilExit()
        let stopSeconds = Date().timeIntervalSince(signalled)
        acknowledged.lock.withLock { acknowledged.stop = true }
        #expect(writers.wait(timeout: .now() + 20) == .success)
        #expect(server.process.terminationReason == .exit)
        #expect(server.process.terminationStatus == 0)
        #expect(stopSeconds < 10, "stopping took \(stopSeconds) s")
        let log = server.stop(keepData: true)

        let restarted = try ServerProcess(arguments: ["--log-level", "warning"], directory: server.directory)
        defer { _ = restarted.stop() }
        let port2 = restarted.port
        let ids = acknowledged.lock.withLock { acknowledged.ids }
        #expect(ids.count >= 100)
        let keys = "{\"keys\":[" + ids.map { "\"\($0)\"" }.joined(separator: ",") + "]}"
        let rows = try #require(try json(port2, "POST", "/source/_all_docs", keys)["rows"]?.arrayValue)
        let missing = zip(ids, rows).filter { $0.1["error"] != nil || $0.1["id"]?.stringValue != $0.0 }.map(\.0)
        #expect(missing.isEmpty, "acknowledged but lost: \(missing.prefix(10)); log: \(log.suffix(2000))")

        // The job comes back and carries on from its checkpoint: one more write reaches the
        // target, and the new session's history entry starts past zero.
        _ = try json(port2, "PUT", "/source/after-restart", #"{"n":0}"#)
        let total = docCount(port2, "source")
        #expect(waitUntil(seconds: 20) { docCount(port2, "target") == total })
        let jobID = try #require(try json(port2, "GET", "/_scheduler/docs/_replicator/job")["id"]?.stringValue)
        let base = String(jobID.prefix { $0 != "+" })
        var history: [JSONValue] = []
        #expect(waitUntil(seconds: 15) {
            history = (try? json(port2, "GET", "/target/_local/\(base)"))?["history"]?.arrayValue ?? []
            return history.count >= 2
        })
        let startSequence = history.first?["start_last_seq"]
        let startNumber = startSequence?.intValue ?? Int(startSequence?.stringValue?.prefix { $0.isNumber } ?? "") ?? 0
        #expect(startNumber > 0, "the session after the restart started from \(String(describing: startSequence))")
    }
}
