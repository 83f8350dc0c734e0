import CouchCore
import CouchTestSupport
import Foundation
import Testing

/// The server in a memory-capped cgroup, as a container runs it, with tenants' functions
/// allocating gigabytes inside single native calls: the functions are stopped, the server lives.
@Suite struct MemoryCappedServerTests {
    @Test func nativeAllocationsInFunctionsCannotTakeTheServerDown() throws {
        guard let cgroup = MemoryCgroup(limit: 1536 * 1024 * 1024) else {
            print("MemoryCappedServerTests: no writable memory cgroup here; the cgroup check did not run")
            return
        }
        defer { cgroup.remove() }
        let server = try ServerProcess()
        defer { server.stop() }
        try cgroup.add(server.process.processIdentifier)
        let port = server.port
        #expect(try httpRequest(port: port, "PUT", "/db").status == 201)
        let shows: JSONValue = ["shows": [
            "typed": "function(doc, req) { var a = new Uint8Array(1 << 30); a.fill(1); return String(a[1]); }",
            "split": "function(doc, req) { return String('x'.repeat(1 << 28).split('').join('').length); }",
            "hello": "function(doc, req) { return 'hello'; }",
        ]]
        #expect(try httpRequest(port: port, "PUT", "/db/_design/app", body: Array(shows.serializedString().utf8)).status == 201)

        let statuses = Statuses()
        DispatchQueue.concurrentPerform(iterations: 4) { index in
            let name = index % 2 == 0 ? "typed" : "split"
            let response = try? HTTPTestConnection(port: port, timeout: 120).request("GET", "/db/_design/app/_show/\(name)")
            statuses.add(response.map { "\($0.status) \((try? JSONValue.parse($0.body))?["error"]?.stringValue ?? "")" } ?? "none")
        }
        #expect(statuses.all == Array(repeating: "500 os_process_error", count: 4))
        #expect(server.process.isRunning)
        #expect(try httpRequest(port: port, "GET", "/db/_design/app/_show/hello").text == "hello")
        #expect(cgroup.peak < 1536 * 1024 * 1024)
    }
}

private final class Statuses: @unchecked Sendable {
    private let lock = NSLock()
    private var values: [String] = []
    func add(_ value: String) { lock.withLock { values.append(value) } }
    var all: [String] { lock.withLock { values } }
}

/// A memory cgroup of its own under this process's (cgroup v1's memory controller, or v2),
/// when the machine lets the tests make one.
struct MemoryCgroup {
    let path: String
    let isVersion2: Bool

    init?(limit: Int) {
        guard let lines = try? String(contentsOfFile: "/proc/self/cgroup", encoding: .utf8).split(separator: "\n") else { return nil }
        let name = "couchette-test-\(Digest.randomHex(bytes: 6))"
        if let line = lines.first(where: { $0.split(separator: ":", maxSplits: 2).dropFirst().first == "memory" }),
           let own = line.split(separator: ":", maxSplits: 2).last {
            path = "/sys/fs/cgroup/memory\(own == "/" ? "" : own)/\(name)"
            isVersion2 = false
        } else if let line = lines.first(where: { $0.hasPrefix("0::") }) {
            path = "/sys/fs/cgroup\(line.dropFirst(3))/\(name)"
            isVersion2 = true
        } else {
            return nil
        }
        guard mkdir(path, 0o755) == 0 else { return nil }
        guard write(isVersion2 ? "memory.max" : "memory.limit_in_bytes", String(limit)) else {
            rmdir(path)
            return nil
        }
    }

    func add(_ process: Int32) throws {
        guard write("cgroup.procs", String(process)) else { throw TestServerError.unexpected("cannot move \(process) into \(path)") }
    }

    /// The most memory the group's processes held at once.
    var peak: Int {
        let file = isVersion2 ? "memory.peak" : "memory.max_usage_in_bytes"
        return Int(((try? String(contentsOfFile: "\(path)/\(file)", encoding: .utf8)) ?? "").trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
    }

    func remove() {
        // Every process of the group has ended by now (the server was stopped, its workers follow).
        for _ in 0..<50 where rmdir(path) != 0 { usleep(100_000) }
    }

    private func write(_ file: String, _ value: String) -> Bool {
        let descriptor = open("\(path)/\(file)", O_WRONLY)
        guard descriptor >= 0 else { return false }
        defer { close(descriptor) }
        let bytes = Array(value.utf8)
        return Glibc.write(descriptor, bytes, bytes.count) == bytes.count
    }
}
